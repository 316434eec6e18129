#!/usr/bin/env python3
"""Build a realistic Python heap of about SIZE bytes, then wait to be captured.

    python3 bench/heap-corpus.py [--linger SECONDS] SIZE    (SIZE: 300M, 1G, ...)

The heap is what a service written in Python holds: records as dicts,
lists of numbers, log lines and text, an in-memory sqlite3 database with
tables and indexes, and JSON documents parsed and kept.  It grows in
rounds of each until the process's anonymous resident memory passes SIZE
plus a margin; then the script prints "ready" on standard output and
sleeps (--linger seconds at most, default 900) until it is killed, for
`zmem capture PID --max-size SIZE` to take the first SIZE bytes of its
private writable memory.

Every random choice comes from seeded generators, so the objects, and the
order they are made in, are the same for the same SIZE.  bench/nbd-vs-nbdkit
makes the bytes the same too: it runs this with PYTHONHASHSEED=0, glibc's
tcache off (its key is random), address randomisation off (setarch -R), a
small fixed environment and the script on standard input (so that no path
lands in the heap).  The bytes still depend on the Python and sqlite
versions.
"""
import gc
import json
import os
import random
import sqlite3
import sys
import time

SEED = 20240521
MARGIN = 8 << 20  # past SIZE, for the pages the capture meets first

CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Austin", "Lyon",
          "Krakow", "Pune", "Leeds", "Porto", "Quito", "Hobart", "Tartu",
          "Bergen", "Cork", "Graz", "Malmo", "Split", "Turin"]
STATUSES = ["new", "paid", "shipped", "delivered", "returned", "cancelled"]
KINDS = ["login", "logout", "view", "click", "search", "purchase", "error"]
TLDS = ["com", "org", "net", "io", "de", "fr", "co.uk"]


def parse_size(s):
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    unit = s[-1] if s and s[-1] in "KMG" else ""
    return int(float(s[:len(s) - len(unit)]) * mult[unit])


def rss_anon():
    """RssAnon, from statm: /proc/self/status would leave its PID and
    context-switch counts in the heap, different each run."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        f = os.read(fd, 256).split()
    finally:
        os.close(fd)
    return (int(f[1]) - int(f[2])) * os.sysconf("SC_PAGE_SIZE")


class Words:
    """Pseudo-words with a Zipf-like frequency, as in real text."""

    def __init__(self, rng, n=6000):
        cons, vows = "bcdfghjklmnprstvwz", "aeiou"
        seen, self.words = set(), []
        while len(self.words) < n:
            w = "".join(rng.choice(cons) + rng.choice(vows)
                        for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
            if rng.random() < 0.3:
                w += rng.choice(cons)
            if w not in seen:
                seen.add(w)
                self.words.append(w)
        self.cum = []
        t = 0.0
        for i in range(n):
            t += 1.0 / (i + 1)
            self.cum.append(t)
        self.rng = rng

    def word(self):
        return self.rng.choices(self.words, cum_weights=self.cum)[0]

    def sentence(self, lo=5, hi=18):
        ws = [self.word() for _ in range(self.rng.randint(lo, hi))]
        return " ".join(ws).capitalize() + self.rng.choice(".....?!")


class Heap:
    def __init__(self, rng):
        self.rng = rng
        self.w = Words(rng)
        self.users = []      # dicts
        self.by_email = {}   # email -> user dict
        self.posts = []      # (user id, title, body) tuples
        self.series = []     # lists of ints and floats
        self.docs = []       # parsed JSON documents
        self.cache = {}      # "key:n" -> str, as a memo cache keeps
        self.log = []        # formatted log lines, kept for a debug dump
        self.db = sqlite3.connect(":memory:")
        self.db.executescript("""
            PRAGMA cache_size = -1048576;
            PRAGMA journal_mode = OFF;  -- its header holds a random nonce
            CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT,
                                city TEXT, created TEXT, bio TEXT);
            CREATE UNIQUE INDEX users_email ON users (email);
            CREATE INDEX users_city ON users (city, created);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER,
                                 item TEXT, qty INTEGER, price_cents INTEGER,
                                 status TEXT, ts TEXT);
            CREATE INDEX orders_user ON orders (user_id, ts);
            CREATE INDEX orders_status ON orders (status);
            CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, ts INTEGER,
                                 payload TEXT);
            CREATE INDEX events_kind_ts ON events (kind, ts);
        """)
        # a product catalogue: orders and carts name its items and prices
        self.catalog = [("SKU-%05d" % rng.randint(0, 99999), rng.randint(99, 49999))
                        for _ in range(3000)]
        # and the clients it sees, a few thousand addresses
        self.clients = ["10.%d.%d.%d" % (rng.randint(0, 3), rng.randint(0, 255),
                                         rng.randint(1, 254)) for _ in range(2000)]
        self.uid = 0
        self.oid = 0
        self.eid = 0
        self.clock = 1700000000

    def name(self):
        return "%s %s" % (self.w.word().capitalize(), self.w.word().capitalize())

    def timestamp(self):
        self.clock += self.rng.randint(0, 90)
        t = time.gmtime(self.clock)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)

    def user(self):
        rng = self.rng
        self.uid += 1
        name = self.name()
        email = "%s.%d@%s.%s" % (name.split()[0].lower(), self.uid,
                                 self.w.word(), rng.choice(TLDS))
        u = {
            "id": self.uid,
            "name": name,
            "email": email,
            "city": rng.choice(CITIES),
            "age": rng.randint(18, 90),
            "score": round(rng.gauss(50, 15), 2),
            "active": rng.random() < 0.8,
            "tags": [self.w.word() for _ in range(rng.randint(0, 5))],
            "created": self.timestamp(),
            "token": "%032x" % rng.getrandbits(128),
        }
        self.users.append(u)
        self.by_email[email] = u
        return u

    def document(self, u):
        rng = self.rng
        doc = {
            "user": u["id"],
            "session": "%016x" % rng.getrandbits(64),
            "cart": [{"sku": item[0], "qty": rng.randint(1, 4),
                      "price": item[1] / 100,
                      "note": self.w.sentence(2, 6) if rng.random() < 0.2 else None}
                     for item in rng.choices(self.catalog, k=rng.randint(1, 6))],
            "prefs": {"lang": rng.choice(["en", "de", "fr", "pt", "ja"]),
                      "theme": rng.choice(["dark", "light"]),
                      "notify": {"email": rng.random() < 0.5, "sms": rng.random() < 0.1}},
            "history": [self.timestamp() for _ in range(rng.randint(0, 8))],
        }
        return json.loads(json.dumps(doc))  # as read off the wire

    def round(self, n=400):
        rng = self.rng
        rows, orders, events = [], [], []
        for _ in range(n):
            u = self.user()
            bio = " ".join(self.w.sentence() for _ in range(rng.randint(0, 2)))
            rows.append((u["id"], u["name"], u["email"], u["city"], u["created"], bio))
            for _ in range(rng.randint(0, 4)):
                self.oid += 1
                sku, cents = rng.choice(self.catalog)
                orders.append((self.oid, u["id"], sku, rng.randint(1, 9), cents,
                               rng.choice(STATUSES), self.timestamp()))
            for _ in range(rng.randint(1, 4)):
                self.eid += 1
                payload = json.dumps({"user": u["id"], "ip": rng.choice(self.clients),
                    "path": "/" + "/".join(self.w.word() for _ in range(rng.randint(1, 4)))})
                events.append((self.eid, rng.choice(KINDS), self.clock, payload))
            for _ in range(rng.randint(1, 6)):
                self.log.append("%s INFO  web.request %s /%s/%d status=%d bytes=%d in %dms" % (
                    self.timestamp(), rng.choice(["GET", "GET", "GET", "POST", "PUT"]),
                    rng.choice(["users", "orders", "cart", "search"]), u["id"],
                    rng.choice([200, 200, 200, 200, 304, 404, 500]),
                    rng.randint(80, 40000), rng.randint(1, 250)))
            if rng.random() < 0.15:
                self.posts.append((u["id"], self.w.sentence(3, 8),
                                   "\n".join(self.w.sentence() for _ in range(rng.randint(2, 8)))))
            if rng.random() < 0.6:
                self.docs.append(self.document(u))
            if rng.random() < 0.25:
                k = rng.randint(16, 256)
                if rng.random() < 0.5:
                    self.series.append([rng.randint(0, 1000) for _ in range(k)])
                else:
                    self.series.append([round(rng.uniform(0, 100), 3) for _ in range(k)])
            if rng.random() < 0.3:
                self.cache["user:%d:summary" % u["id"]] = "%s (%s), %d orders" % (
                    u["name"], u["city"], len(orders))
        self.db.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?)", rows)
        self.db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)", orders)
        self.db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", events)
        self.db.commit()
        # and the program reads too: a few queries whose results it keeps
        city = rng.choice(CITIES)
        self.cache["top:" + city] = self.db.execute(
            "SELECT u.name, count(*) FROM orders o JOIN users u ON u.id = o.user_id "
            "WHERE u.city = ? GROUP BY u.id ORDER BY 2 DESC LIMIT 20", (city,)).fetchall()


def main():
    args = sys.argv[1:]
    linger = 900
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(args) == 3 and args[0] == "--linger":
        linger, args = int(args[1]), args[2:]
    if len(args) != 1:
        sys.exit("usage: heap-corpus.py [--linger SECONDS] SIZE")
    target = parse_size(args[0]) + MARGIN
    random.seed(SEED)  # the module's own generator, seeded from urandom at import
    h = Heap(random.Random(SEED))
    while rss_anon() < target:
        h.round()
    gc.collect()
    while rss_anon() < target:  # the collection may have freed some
        h.round()
    sys.stderr.write("heap-corpus: %d users, %d orders, %d events, %d documents, "
                     "%d log lines; %.1f MiB anonymous\n"
                     % (h.uid, h.oid, h.eid, len(h.docs), len(h.log), rss_anon() / 2**20))
    sys.stdout.write("ready\n")  # not its PID: that number would stay in the heap
    sys.stdout.flush()
    time.sleep(linger)


if __name__ == "__main__":
    main()
