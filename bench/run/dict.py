#!/usr/bin/env python3
# A workload of zmem runbench (and the run tests): Python building a large
# dict of strings, then reading it back.
#
#   python3 dict.py N     N entries (default 1500000)
#
# Keys "k<number>", values 100..500 characters cut from a text of words
# of a small vocabulary (text compresses as a program's strings do), all
# chosen by a seeded generator: the same N gives the same dict and the same output on every
# run, whatever the memory it lives in.  After the build: lookups in a
# seeded order, a third of them rewriting their value, then every entry
# hashed in insertion order.  Prints the count and a SHA-256 of the lot.
import hashlib
import random
import sys

WORDS = ("the of and to in is that for it as was with be by on not he this are or "
         "his from at which but have an they you were her she there been one all "
         "would their we him has when who will more no if out so said what up its "
         "about into than them can only other new some time could these two may "
         "first then do any like my now over such our man me even most made after "
         "also did many before must through back years where much your way well").split()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1500000
    rnd = random.Random(20261205)
    words = WORDS
    text = " ".join(words[rnd.randrange(len(words))] for _ in range(200000))
    span = len(text) - 500
    d = {}
    for i in range(n):
        k = "k%09d" % ((i * 2654435761) % 4294967296)
        o = rnd.randrange(span)
        d[k] = text[o:o + rnd.randint(100, 500)]
    keys = list(d)
    total = 0
    for _ in range(n):
        k = keys[rnd.randrange(n)]
        v = d[k]
        total += len(v)
        if rnd.random() < 0.33:
            d[k] = v[::-1]
    h = hashlib.sha256()
    for k, v in d.items():
        h.update(k.encode())
        h.update(v.encode())
    print("entries %d looked-up-chars %d sha256 %s" % (len(d), total, h.hexdigest()))


main()
