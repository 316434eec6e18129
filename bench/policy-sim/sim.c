/* Trace-driven simulator for a userspace compressed region's cold-page policy.
 * Policies see only faults (first-touch / refault with eviction-clock distance)
 * and write-protect faults; LRU and OPT are perfect-information references.
 * Build: gcc -O2 -o sim sim.c -lm
 * Run:   ./sim [--seed S] [--writes W] [--trace NAME] [--n N] [--limit L] [--len A]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t u32;
typedef uint8_t u8;
typedef uint64_t u64;

/* ---------------- RNG ---------------- */
static u64 rs;
static inline u64 rnd(void)
{
	u64 z = (rs += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static inline double rndu(void)
{
	return (rnd() >> 11) * (1.0 / 9007199254740992.0);
}
static inline u32 rndn(u32 n)
{
	return (u32)(((rnd() >> 32) * (u64)n) >> 32);
}

/* ---------------- trace ---------------- */
enum { OP_READ = 0, OP_WRITE = 1, OP_FREE = 2 };
typedef struct {
	u32 page;
	u8 op;
} Op;
static Op *ops;
static long nops, nalloc_ops;
static long warm; /* ops before warm are not counted */
static u32 N, LIMIT;
static long LEN;
static double WR;
static void push(u32 p, u8 op)
{
	if (nops == nalloc_ops) {
		nalloc_ops = nalloc_ops ? nalloc_ops * 2 : 1 << 20;
		ops = realloc(ops, nalloc_ops * sizeof(Op));
	}
	ops[nops].page = p;
	ops[nops].op = op;
	nops++;
}
static void acc(u32 p)
{
	push(p, rndu() < WR ? OP_WRITE : OP_READ);
}
static u32 *perm_new(u32 n)
{
	u32 *a = malloc(n * 4);
	for (u32 i = 0; i < n; i++)
		a[i] = i;
	for (u32 i = n - 1; i > 0; i--) {
		u32 j = rndn(i + 1), t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
	return a;
}
static void init_write_all(void)
{
	for (u32 p = 0; p < N; p++)
		push(p, OP_WRITE);
	warm = nops;
}

static u8 *g_hot; /* diagnostics only: page is in (first) hot set */
static void gen_hotcold(double hotfrac_acc, double hotfrac_pages, int phase, int scan)
{
	init_write_all();
	u32 *pm = perm_new(N);
	u32 H = (u32)(N * hotfrac_pages);
	g_hot = calloc(N, 1);
	for (u32 i = 0; i < H; i++)
		g_hot[pm[i]] = 1;
	for (long i = 0; i < LEN; i++) {
		u32 off = 0;
		if (phase && i >= LEN / 2)
			off = H; /* second hot set = next H pages of permutation */
		if (scan && i == LEN / 2) {
			for (u32 p = 0; p < N; p++)
				acc(p);
		}
		u32 p;
		if (rndu() < hotfrac_acc)
			p = pm[(off + rndn(H)) % N];
		else {
			u32 k = rndn(N - H);
			p = pm[(off + H + k) % N];
		}
		acc(p);
	}
	free(pm);
}
static void gen_loop(u32 len)
{
	init_write_all();
	for (long i = 0; i < LEN; i++)
		acc((u32)(i % len));
}
static void gen_seq(void)
{
	init_write_all();
	for (u32 p = 0; p < N; p++)
		acc(p);
}
static void gen_zipf(double s)
{
	init_write_all();
	double *cdf = malloc(N * sizeof(double));
	double t = 0;
	for (u32 i = 0; i < N; i++) {
		t += 1.0 / pow(i + 1, s);
		cdf[i] = t;
	}
	for (u32 i = 0; i < N; i++)
		cdf[i] /= t;
	u32 *pm = perm_new(N);
	for (long i = 0; i < LEN; i++) {
		double u = rndu();
		u32 lo = 0, hi = N - 1;
		while (lo < hi) {
			u32 m = (lo + hi) / 2;
			if (cdf[m] < u)
				lo = m + 1;
			else
				hi = m;
		}
		acc(pm[lo]);
	}
	free(cdf);
	free(pm);
}
/* growing/shrinking heap: grow 0..N (1 alloc per 9 ops) with 80/20 accesses over live pages,
 * free random half at LEN/3, steady till 2LEN/3, then re-allocate freed pages. */
static u32 *livearr[2], nlive[2], *livepos;
static u8 *ishot;
static void live_add(u32 p)
{
	int h = ishot[p];
	livepos[p] = nlive[h];
	livearr[h][nlive[h]++] = p;
}
static void live_del(u32 p)
{
	int h = ishot[p];
	u32 i = livepos[p];
	u32 q = livearr[h][--nlive[h]];
	livearr[h][i] = q;
	livepos[q] = i;
}
static void gen_heap(void)
{
	warm = 0;
	u32 *pm = perm_new(N);
	ishot = calloc(N, 1);
	for (u32 i = 0; i < N / 5; i++)
		ishot[pm[i]] = 1;
	livearr[0] = malloc(N * 4);
	livearr[1] = malloc(N * 4);
	livepos = malloc(N * 4);
	nlive[0] = nlive[1] = 0;
	u32 next = 0;
	u32 *freed = NULL;
	u32 nfreed = 0, refill = 0;
	for (long i = 0; i < LEN; i++) {
		if (i < LEN / 3 && i % 9 == 0 && next < N) {
			push(next, OP_WRITE);
			live_add(next);
			next++;
			continue;
		}
		if (i == LEN / 3) {
			u32 *pp = perm_new(N);
			freed = malloc(N * 4);
			for (u32 k = 0; k < N && nfreed < N / 2; k++) {
				u32 p = pp[k];
				if (p < next) {
					push(p, OP_FREE);
					live_del(p);
					freed[nfreed++] = p;
				}
			}
			free(pp);
		}
		if (i >= 2 * LEN / 3 && i % 9 == 0 && refill < nfreed) {
			u32 p = freed[refill++];
			push(p, OP_WRITE);
			live_add(p);
			continue;
		}
		u32 p;
		int h = rndu() < 0.8;
		if (nlive[h] == 0)
			h = !h;
		if (nlive[h] == 0)
			continue;
		p = livearr[h][rndn(nlive[h])];
		acc(p);
	}
	free(pm);
	free(ishot);
	free(livearr[0]);
	free(livearr[1]);
	free(livepos);
	free(freed);
}

/* ---------------- simulator core ---------------- */
enum { K_FIRST = 0, K_REFAULT = 1 };
static u8 *s_res, *s_dirty, *s_wp, *s_seen;
static long s_hotf2, s_hotf, s_faults, s_wpf, s_wpops, s_compress;
static long s_t;
static u32 s_nres;
static void sim_wp(u32 p)
{
	if (s_res[p] && !s_wp[p]) {
		s_wp[p] = 1;
		s_wpops++;
	}
}

typedef struct {
	const char *name;
	void (*init)(void);
	void (*fault)(u32 p, int kind, int w);
	void (*wpfault)(u32 p);
	u32 (*evict)(void);
	void (*remove)(u32 p); /* page freed while resident */
	void (*forget)(u32 p); /* page freed: forget history */
	void (*hit)(u32 p);    /* only for perfect-information references; NULL otherwise */
} Policy;

/* ---------------- generic intrusive lists ---------------- */
static u32 *L_prev, *L_next;
static u8 *L_id;
#define NIL 0xffffffffu
typedef struct {
	u32 head, tail, n;
} List;
static void l_init(List *l)
{
	l->head = l->tail = NIL;
	l->n = 0;
}
static void l_push(List *l, u32 p, u8 id)
{
	L_id[p] = id;
	L_next[p] = NIL;
	L_prev[p] = l->tail;
	if (l->tail != NIL)
		L_next[l->tail] = p;
	else
		l->head = p;
	l->tail = p;
	l->n++;
}
static void l_del(List *l, u32 p)
{
	if (L_prev[p] != NIL)
		L_next[L_prev[p]] = L_next[p];
	else
		l->head = L_next[p];
	if (L_next[p] != NIL)
		L_prev[L_next[p]] = L_prev[p];
	else
		l->tail = L_prev[p];
	l->n--;
	L_id[p] = 0;
}
static u32 l_pop(List *l)
{
	u32 p = l->head;
	l_del(l, p);
	return p;
}
static u32 l_poptail(List *l)
{
	u32 p = l->tail;
	l_del(l, p);
	return p;
}

/* ---------------- FIFO ---------------- */
static List fifo;
static void fifo_init(void)
{
	l_init(&fifo);
}
static void fifo_fault(u32 p, int k, int w)
{
	(void)k;
	(void)w;
	l_push(&fifo, p, 1);
}
static void nop_wp(u32 p)
{
	(void)p;
}
static u32 fifo_evict(void)
{
	return l_pop(&fifo);
}
static void fifo_remove(u32 p)
{
	l_del(&fifo, p);
}
static void nop_forget(u32 p)
{
	(void)p;
}
/* LRU (perfect information) */
static void lru_hit(u32 p)
{
	l_del(&fifo, p);
	l_push(&fifo, p, 1);
}

/* ---------------- OPT (Belady) ---------------- */
static long *nextuse;
typedef struct {
	long nu;
	u32 p;
} HE;
static HE *hp;
static long hn;
static long *curnu;
static void h_push(long nu, u32 p)
{
	long i = hn++;
	while (i > 0) {
		long q = (i - 1) / 2;
		if (hp[q].nu >= nu)
			break;
		hp[i] = hp[q];
		i = q;
	}
	hp[i].nu = nu;
	hp[i].p = p;
}
static HE h_pop(void)
{
	HE top = hp[0], x = hp[--hn];
	long i = 0;
	for (;;) {
		long c = 2 * i + 1;
		if (c >= hn)
			break;
		if (c + 1 < hn && hp[c + 1].nu > hp[c].nu)
			c++;
		if (hp[c].nu <= x.nu)
			break;
		hp[i] = hp[c];
		i = c;
	}
	hp[i] = x;
	return top;
}
static void opt_prep(void)
{
	nextuse = malloc(nops * sizeof(long));
	long *last = malloc(N * sizeof(long));
	for (u32 p = 0; p < N; p++)
		last[p] = (long)4e18;
	for (long i = nops - 1; i >= 0; i--) {
		u32 p = ops[i].page;
		if (ops[i].op == OP_FREE) {
			last[p] = (long)4e18;
			nextuse[i] = 0;
		} else {
			nextuse[i] = last[p];
			last[p] = i;
		}
	}
	free(last);
}
static void opt_init(void)
{
	hp = malloc((nops + 16) * sizeof(HE));
	hn = 0;
	curnu = malloc(N * sizeof(long));
}
static void opt_touch(u32 p)
{
	curnu[p] = nextuse[s_t];
	h_push(curnu[p], p);
}
static void opt_fault(u32 p, int k, int w)
{
	(void)k;
	(void)w;
	opt_touch(p);
}
static u32 opt_evict(void)
{
	for (;;) {
		HE e = h_pop();
		if (s_res[e.p] && curnu[e.p] == e.nu)
			return e.p;
	}
}
static void opt_remove(u32 p)
{
	curnu[p] = -1;
}

/* ---------------- CLOCK with refault promotion ----------------
 * one FIFO ring; a page refaulting within LIMIT evictions gets a reference bit,
 * the hand gives it a second chance (clears the bit, re-queues). */
static u32 *stamp;
static u64 E;
static u8 *refb;
static void clk_init(void)
{
	l_init(&fifo);
	E = 0;
}
static void clk_fault(u32 p, int k, int w)
{
	(void)w;
	refb[p] = 0;
	if (k == K_REFAULT && (u32)(E - stamp[p]) <= LIMIT)
		refb[p] = 1;
	l_push(&fifo, p, 1);
}
static void clk_wp(u32 p)
{
	refb[p] = 1;
}
static u32 clk_evict(void)
{
	for (;;) {
		u32 p = l_pop(&fifo);
		if (refb[p]) {
			refb[p] = 0;
			l_push(&fifo, p, 1);
			sim_wp(p);
			continue;
		}
		stamp[p] = (u32)E++;
		return p;
	}
}

/* ---------------- RDP: refault-distance probation/protected ----------------
 * per page: stamp (eviction clock at eviction), cnt (3 bits), list id.
 * probation FIFO; protected tiers by cnt; victim in protected = lowest tier,
 * newest first (LIFO) or oldest first (FIFO) per option. */
static double P_D = 0.5; /* promote if refault distance <= P_D*LIMIT evictions */
static int P_PMIN = 32;	 /* probation min = LIMIT/P_PMIN */
static int P_LIFO = 1;	 /* protected demotion order within a tier */
static int P_AGE = 16;	 /* halve counts every P_AGE*LIMIT evictions (0=never) */
static int P_CMAX = 7;
static int P_WPDEM = 1; /* write-protect demoted pages, write fault in probation => promote */
static int P_DEMOTE = 1;
static int P_RESET = 1;
static int P_RCLK = 0;
static u64 PRE;
static double P_ROOM = 4; /* threshold bonus per free protected slot */
    /* long refault resets the count (count = consecutive short refaults) */ /* demote protected
										victim to probation
										(1) or evict
										directly (0) */
static u8 *cnt;
static u8 seen2[1 << 20];
static u8 *why;
static long whyc[4][2]; /* diag */
#define NT 8
#define NB 4
static int P_DB = 1; /* use distance buckets within tier */
static u8 *dbk;	     /* distance bucket of last short refault: 0 = shortest */
static List prob, prot[NT * NB];
static u32 nprot;
static u64 next_age;
static void rdp_init(void)
{
	l_init(&prob);
	for (int i = 0; i < NT * NB; i++)
		l_init(&prot[i]);
	if (!dbk)
		dbk = calloc(1 << 24, 1);
	nprot = 0;
	E = 0;
	PRE = 0;
	next_age = P_AGE ? (u64)P_AGE * LIMIT : ~0ULL;
}
static int lidx(u32 p)
{
	return cnt[p] * NB + (P_DB ? NB - 1 - dbk[p] : 0);
}
static void rdp_protect(u32 p)
{
	why[p] = 2;
	if (cnt[p] < 1)
		cnt[p] = 1;
	int i = lidx(p);
	l_push(&prot[i], p, (u8)(2 + i));
	nprot++;
}
static void rdp_fault(u32 p, int k, int w)
{
	(void)w;
	if (!why)
		why = calloc(1 << 24, 1);
	if (k == K_FIRST) {
		cnt[p] = 0;
		why[p] = 0;
		l_push(&prob, p, 1);
		return;
	}
	if (s_t >= warm && g_hot && g_hot[p] && !seen2[p]) {
		seen2[p] = 1;
		whyc[3][0]++;
	}
	u32 d = (u32)((P_RCLK ? PRE : E) - stamp[p]);
	PRE++;
	u32 D = (u32)(P_D * LIMIT);
	if (P_ROOM) {
		u32 cap = LIMIT - LIMIT / P_PMIN;
		if (nprot < cap)
			D += (u32)((double)P_ROOM * (cap - nprot));
	}
	if (g_hot && g_hot[p] && s_t >= warm)
		whyc[why[p]][d <= D]++;
	if (d <= D) {
		if (cnt[p] < P_CMAX)
			cnt[p]++;
		dbk[p] = d <= D / 8 ? 0 : d <= D / 4 ? 1 : d <= D / 2 ? 2 : 3;
		rdp_protect(p);
	} else {
		if (P_RESET)
			cnt[p] = 0;
		why[p] = 0;
		l_push(&prob, p, 1);
	}
}
static void rdp_wpfault(u32 p)
{
	if (L_id[p] == 1) {
		l_del(&prob, p);
		if (cnt[p] < P_CMAX)
			cnt[p]++;
		dbk[p] = 0;
		rdp_protect(p);
	}
}
static void rdp_age(void)
{
	for (int i = NB; i < NT * NB; i++) {
		u32 n = prot[i].n;
		for (u32 k = 0; k < n; k++) {
			u32 p = l_pop(&prot[i]);
			nprot--;
			cnt[p] >>= 1;
			rdp_protect(p);
		}
	}
	for (u32 p = 0; p < N; p++)
		if (!s_res[p])
			cnt[p] >>= 1;
}
static u32 rdp_prot_victim(void)
{
	for (int t = NB; t < NT * NB; t++)
		if (prot[t].n) {
			u32 p = P_LIFO ? l_poptail(&prot[t]) : l_pop(&prot[t]);
			nprot--;
			return p;
		}
	return NIL;
}
static u32 rdp_evict(void)
{
	if (E >= next_age) {
		rdp_age();
		next_age += (u64)P_AGE * LIMIT;
	}
	u32 cap = LIMIT - LIMIT / P_PMIN;
	while (nprot > cap) {
		u32 q = rdp_prot_victim();
		if (P_DEMOTE) {
			why[q] = 1;
			l_push(&prob, q, 1);
			if (P_WPDEM)
				sim_wp(q);
		} else {
			stamp[q] = (u32)E++;
			return q;
		}
	}
	u32 v;
	if (prob.n)
		v = l_pop(&prob);
	else
		v = rdp_prot_victim();
	stamp[v] = (u32)(P_RCLK ? PRE : E);
	E++;
	return v;
}
static void rdp_remove(u32 p)
{
	u8 id = L_id[p];
	if (id == 1)
		l_del(&prob, p);
	else {
		l_del(&prot[id - 2], p);
		nprot--;
	}
}
static void rdp_forget(u32 p)
{
	cnt[p] = 0;
}

/* ---------------- RR: refault-rate ranking ----------------
 * per page: stamp (eviction clock at last eviction), k (decayed refault count, fixed point),
 * S (decayed sum of non-resident exposure in evictions).  score = (k+1)/(S+B), B=N-LIMIT:
 * posterior mean of a Poisson fault rate with a Gamma(1,B) prior whose mean 1/B is the
 * average rate of a non-resident page (one fault per eviction spread over N-LIMIT pages).
 * protected = top-score pages (bucketed by log score, 1/Q octave per bucket). */
static int R_Q = 4;	  /* buckets per octave */
static int R_HYST = 1;	  /* newcomer must be >= HYST buckets above protected min */
static double R_KMAX = 8; /* evidence memory (refaults) for EW decay */
static int R_AGE = 16;	  /* halve k,S every AGE*LIMIT evictions */
static int R_LIFO = 1;
static int R_PMIN = 32;
static int R_ROOMFREE = 1;  /* promote any refault while protected has room */
static double R_BMUL = 1.0; /* B = BMUL*(N-LIMIT) (for sensitivity only) */
static int R_WPCLK =
    0; /* write-protect protected pages via a slow clock (per eviction: this many) */
static int R_DMAX = 0;
static double R_AREJ = 0;
static long r_rej; /* >0: age after AREJ*LIMIT short (d<=LIMIT/2) refaults were refused promotion */
static int R_RST = 0;
static double R_RSTD =
    0.5; /* long refault (d > RSTD*LIMIT) resets evidence: 1 -> (0,0), 2 -> (1,d) */
static int R_CLK = 0;
static u64 RE; /* 0: eviction clock, 1: refault clock, 2: op-time clock */
#define RNOW                                                                                       \
	(R_CLK == 0   ? E                                                                          \
	 : R_CLK == 1 ? RE                                                                         \
		      : (u64)s_t) /* if >0: refault counts as evidence only if d <= DMAX*LIMIT...  \
				     (unused=0) */
static float *rk, *rS;
static u8 *rb;
#define RNB 256
static List rprot[RNB];
static u64 rbm[RNB / 64];
static u32 rnprot;
static u64 r_next_age;
static long r_demhot, r_promcold, r_clkwp;
static List rprob;
static u32 r_hand; /* clock hand over pages (for WP sampling) */
static int r_bucket(u32 p)
{
	double B = R_BMUL * (double)(N - LIMIT);
	double s = (rk[p] + 1.0) / (rS[p] + B);
	/* log2(s*B) >= 0 roughly; map to bucket */ double l = log2(s * B) * R_Q + 16;
	int b = (int)floor(l);
	if (b < 0)
		b = 0;
	if (b >= RNB)
		b = RNB - 1;
	return b;
}
static void r_push(u32 p)
{
	int b = r_bucket(p);
	rb[p] = (u8)b;
	l_push(&rprot[b], p, 2);
	rbm[b >> 6] |= 1ULL << (b & 63);
	rnprot++;
}
static void r_del(u32 p)
{
	int b = rb[p];
	l_del(&rprot[b], p);
	if (!rprot[b].n)
		rbm[b >> 6] &= ~(1ULL << (b & 63));
	rnprot--;
}
static int r_minb(void)
{
	for (int i = 0; i < RNB / 64; i++)
		if (rbm[i])
			return i * 64 + __builtin_ctzll(rbm[i]);
	return -1;
}
static u32 r_victim(void)
{
	int b = r_minb();
	if (b < 0)
		return NIL;
	u32 p = R_LIFO ? rprot[b].tail : rprot[b].head;
	r_del(p);
	return p;
}
static void rr_init(void)
{
	l_init(&rprob);
	for (int i = 0; i < RNB; i++)
		l_init(&rprot[i]);
	memset(rbm, 0, sizeof rbm);
	rnprot = 0;
	E = 0;
	if (!rk) {
		rk = calloc(1 << 24, sizeof(float));
		rS = calloc(1 << 24, sizeof(float));
		rb = calloc(1 << 24, 1);
	}
	memset(rk, 0, N * sizeof(float));
	memset(rS, 0, N * sizeof(float));
	r_next_age = R_AGE ? (u64)R_AGE * LIMIT : ~0ULL;
	r_demhot = r_promcold = r_clkwp = 0;
	r_hand = 0;
	RE = 0;
	r_rej = 0;
}
static void rr_age(void);
static void r_evidence(u32 p, double x, double dk)
{ /* add an observation: dk refaults over exposure x */
	double f = 1.0 - 1.0 / R_KMAX;
	if (rk[p] + dk > R_KMAX) {
		rk[p] *= f;
		rS[p] *= f;
	}
	rk[p] += dk;
	rS[p] += x;
}
static void rr_fault(u32 p, int k, int w)
{
	(void)w;
	if (k == K_FIRST) {
		rk[p] = 0;
		rS[p] = 0;
		l_push(&rprob, p, 1);
		return;
	}
	u32 d = (u32)(RNOW - stamp[p]);
	RE++;
	if (R_DMAX && d > (u32)(R_DMAX * LIMIT))
		d = R_DMAX * LIMIT;
	if (R_RST && d > (u32)(R_RSTD * LIMIT)) {
		rk[p] = 0;
		rS[p] = 0;
		if (R_RST == 2)
			r_evidence(p, d, 1.0);
	} else
		r_evidence(p, d, 1.0);
	u32 cap = LIMIT - LIMIT / R_PMIN;
	if (rnprot < cap && R_ROOMFREE) {
		r_push(p);
		if (g_hot && !g_hot[p])
			r_promcold++;
		return;
	}
	int mb = r_minb();
	int b = r_bucket(p);
	if (mb < 0 || b >= mb + R_HYST) {
		r_push(p);
		if (g_hot && !g_hot[p] && s_t >= warm)
			r_promcold++;
		return;
	}
	if (R_AREJ > 0 && d <= LIMIT / 2 && ++r_rej >= (long)(R_AREJ * LIMIT)) {
		r_rej = 0;
		rr_age();
	}
	l_push(&rprob, p, 1);
}
static int R_WPE = 1;
static void rr_wpfault(u32 p)
{
	if (!R_WPE)
		return; /* write to a WP'd resident page: observed use while resident.
treat as a refault with distance = evictions since it was WP'd (stamp reused as WP time) */
	if (L_id[p] == 1) {
		l_del(&rprob, p);
	} else
		r_del(p);
	u32 d = (u32)(RNOW - stamp[p]);
	r_evidence(p, d, 1.0);
	r_push(p);
}
static void rr_age(void)
{
	for (u32 p = 0; p < N; p++) {
		rk[p] *= 0.5f;
		rS[p] *= 0.5f;
	}
	for (int b = 0; b < RNB; b++) {
		u32 n = rprot[b].n;
		for (u32 i = 0; i < n; i++) {
			u32 p = rprot[b].head;
			r_del(p);
			r_push(p);
		}
	}
}
static u32 rr_evict(void)
{
	if (E >= r_next_age) {
		rr_age();
		r_next_age += (u64)R_AGE * LIMIT;
	}
	u32 cap = LIMIT - LIMIT / R_PMIN;
	while (rnprot > cap) {
		u32 q = r_victim();
		if (g_hot && g_hot[q] && s_t >= warm)
			r_demhot++;
		l_push(&rprob, q, 1);
		sim_wp(q);
		stamp[q] = (u32)RNOW;
	}
	if (R_WPCLK) {
		for (int i = 0; i < R_WPCLK; i++) {
			u32 q = r_hand;
			r_hand = (r_hand + 1) % N;
			if (s_res[q] && L_id[q] == 2 && !s_wp[q]) {
				sim_wp(q);
				stamp[q] = (u32)RNOW;
				r_clkwp++;
			}
		}
	}
	u32 v = rprob.n ? l_pop(&rprob) : r_victim();
	stamp[v] = (u32)RNOW;
	E++;
	return v;
}
static void rr_remove(u32 p)
{
	if (L_id[p] == 1)
		l_del(&rprob, p);
	else
		r_del(p);
}
static void rr_forget(u32 p)
{
	rk[p] = 0;
	rS[p] = 0;
}

/* ---------------- Oracle: knows the hot set of hot80_20 (reference only) ---------------- */

/* ---------------- runner ---------------- */
static long run(Policy *pol, long *wpf_out)
{
	s_res = calloc(N, 1);
	s_dirty = calloc(N, 1);
	s_wp = calloc(N, 1);
	s_seen = calloc(N, 1);
	L_prev = malloc(N * 4);
	L_next = malloc(N * 4);
	L_id = calloc(N, 1);
	stamp = calloc(N, 4);
	refb = calloc(N, 1);
	cnt = calloc(N, 1);
	s_hotf2 = s_hotf = s_faults = s_wpf = s_wpops = s_compress = 0;
	s_nres = 0;
	pol->init();
	for (s_t = 0; s_t < nops; s_t++) {
		u32 p = ops[s_t].page;
		int op = ops[s_t].op;
		int counted = s_t >= warm;
		if (op == OP_FREE) {
			if (s_res[p]) {
				pol->remove(p);
				s_res[p] = 0;
				s_nres--;
			}
			s_seen[p] = 0;
			s_dirty[p] = 0;
			s_wp[p] = 0;
			pol->forget(p);
			continue;
		}
		int w = op == OP_WRITE;
		if (s_res[p]) {
			if (w) {
				if (s_wp[p]) {
					s_wp[p] = 0;
					if (counted)
						s_wpf++;
					s_dirty[p] = 1;
					pol->wpfault(p);
				} else
					s_dirty[p] = 1;
			}
			if (pol->hit)
				pol->hit(p);
			continue;
		}
		if (counted) {
			s_faults++;
			if (g_hot && g_hot[p]) {
				s_hotf++;
				if (s_t - warm > LEN / 2)
					s_hotf2++;
			}
		}
		if (s_nres >= LIMIT) {
			u32 v = pol->evict();
			if (!s_res[v]) {
				fprintf(stderr, "%s evicted nonresident %u\n", pol->name, v);
				exit(1);
			}
			s_res[v] = 0;
			s_nres--;
			if (s_dirty[v] && counted)
				s_compress++;
			s_dirty[v] = 0;
			s_wp[v] = 0;
		}
		int kind = s_seen[p] ? K_REFAULT : K_FIRST;
		s_seen[p] = 1;
		s_res[p] = 1;
		s_nres++;
		s_dirty[p] = w || kind == K_FIRST;
		s_wp[p] = !s_dirty[p];
		pol->fault(p, kind, w);
	}
	free(s_res);
	free(s_dirty);
	free(s_wp);
	free(s_seen);
	free(L_prev);
	free(L_next);
	free(L_id);
	free(stamp);
	free(refb);
	free(cnt);
	*wpf_out = s_wpf;
	return s_faults;
}

static Policy P_fifo = {"FIFO",	    fifo_init,	 fifo_fault, nop_wp,
			fifo_evict, fifo_remove, nop_forget, NULL};
static Policy P_lru = {"LRU*",	   fifo_init,	fifo_fault, nop_wp,
		       fifo_evict, fifo_remove, nop_forget, lru_hit};
static Policy P_opt = {"OPT*",	  opt_init,   opt_fault,  nop_wp,
		       opt_evict, opt_remove, nop_forget, NULL};
static Policy P_clk = {"CLOCK-rf", clk_init,	clk_fault,  clk_wp,
		       clk_evict,  fifo_remove, nop_forget, NULL};
static Policy P_rdp = {"RDP",	  rdp_init,   rdp_fault,  rdp_wpfault,
		       rdp_evict, rdp_remove, rdp_forget, NULL};
static Policy P_rr = {"RR", rr_init, rr_fault, rr_wpfault, rr_evict, rr_remove, rr_forget, NULL};
static void opt_hit(u32 p)
{
	opt_touch(p);
}

static const char *tracenames[] = {"hot80_20", "loop1.5L", "seqpass",  "zipf0.99", "zipf0.8",
				   "hot90_10", "phase",	   "hot+scan", "heap",	   NULL};
static void gen(const char *t)
{
	nops = 0;
	warm = 0;
	free(g_hot);
	g_hot = NULL;
	if (!strcmp(t, "hot80_20"))
		gen_hotcold(0.8, 0.2, 0, 0);
	else if (!strcmp(t, "hot90_10"))
		gen_hotcold(0.9, 0.1, 0, 0);
	else if (!strcmp(t, "phase"))
		gen_hotcold(0.8, 0.2, 1, 0);
	else if (!strcmp(t, "hot+scan"))
		gen_hotcold(0.8, 0.2, 0, 1);
	else if (!strcmp(t, "loop1.5L"))
		gen_loop(LIMIT + LIMIT / 2);
	else if (!strcmp(t, "seqpass"))
		gen_seq();
	else if (!strcmp(t, "zipf0.99"))
		gen_zipf(0.99);
	else if (!strcmp(t, "zipf0.8"))
		gen_zipf(0.8);
	else if (!strcmp(t, "heap"))
		gen_heap();
	else {
		fprintf(stderr, "unknown trace %s\n", t);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	u64 seed = 1;
	N = 102400;
	LIMIT = 25600;
	LEN = 3000000;
	WR = 0.0;
	const char *only = NULL;
	int refs = 1;
	const char *pols = "fifo,lru,opt,clk,rdp";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[++i], 0, 0);
		else if (!strcmp(argv[i], "--writes"))
			WR = atof(argv[++i]);
		else if (!strcmp(argv[i], "--trace"))
			only = argv[++i];
		else if (!strcmp(argv[i], "--n"))
			N = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--limit"))
			LIMIT = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--len"))
			LEN = atol(argv[++i]);
		else if (!strcmp(argv[i], "--pols"))
			pols = argv[++i];
		else if (!strcmp(argv[i], "--D"))
			P_D = atof(argv[++i]);
		else if (!strcmp(argv[i], "--pmin"))
			P_PMIN = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--lifo"))
			P_LIFO = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--age"))
			P_AGE = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cmax"))
			P_CMAX = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--wpdem"))
			P_WPDEM = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reset"))
			P_RESET = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--db"))
			P_DB = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--room"))
			P_ROOM = atof(argv[++i]);
		else if (!strcmp(argv[i], "--demote"))
			P_DEMOTE = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rq"))
			R_Q = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rhyst"))
			R_HYST = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rkmax"))
			R_KMAX = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rage"))
			R_AGE = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rlifo"))
			R_LIFO = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rpmin"))
			R_PMIN = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rroom"))
			R_ROOMFREE = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rbmul"))
			R_BMUL = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rwpclk"))
			R_WPCLK = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rclk"))
			R_CLK = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rrst"))
			R_RST = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rrstd"))
			R_RSTD = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rarej"))
			R_AREJ = atof(argv[++i]);
		else if (!strcmp(argv[i], "--prclk"))
			P_RCLK = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rwpe"))
			R_WPE = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rdmax"))
			R_DMAX = atoi(argv[++i]);
		else {
			fprintf(stderr, "bad arg %s\n", argv[i]);
			return 1;
		}
	}
	(void)refs;
	P_opt.hit = opt_hit;
	printf("# N=%u LIMIT=%u LEN=%ld writes=%.2f seed=%llu D=%.2f pmin=L/%d lifo=%d age=%d "
	       "cmax=%d\n",
	       N, LIMIT, LEN, WR, (unsigned long long)seed, P_D, P_PMIN, P_LIFO, P_AGE, P_CMAX);
	printf("%-10s %-9s %9s %7s %9s %9s %9s\n", "trace", "policy", "faults", "/FIFO", "wpfaults",
	       "hotfaults", "hot2ndhalf");
	for (int ti = 0; tracenames[ti]; ti++) {
		if (only && strcmp(only, tracenames[ti]))
			continue;
		rs = seed * 1000003ULL + ti;
		gen(tracenames[ti]);
		long ff = 0;
		char buf[256];
		snprintf(buf, sizeof buf, "%s", pols);
		for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
			Policy *pol = !strcmp(tok, "fifo")  ? &P_fifo
				      : !strcmp(tok, "lru") ? &P_lru
				      : !strcmp(tok, "opt") ? &P_opt
				      : !strcmp(tok, "clk") ? &P_clk
				      : !strcmp(tok, "rdp") ? &P_rdp
				      : !strcmp(tok, "rr")  ? &P_rr
							    : NULL;
			if (!pol) {
				fprintf(stderr, "unknown policy %s\n", tok);
				return 1;
			}
			if (pol == &P_opt)
				opt_prep();
			long wpf;
			long f = run(pol, &wpf);
			if (pol == &P_opt) {
				free(nextuse);
				free(hp);
				free(curnu);
			}
			if (pol == &P_fifo)
				ff = f;
			printf("%-10s %-9s %9ld %7.3f %9ld %9ld %9ld\n", tracenames[ti], pol->name,
			       f, ff ? (double)f / ff : 0.0, wpf, s_hotf, s_hotf2);
			if (pol == &P_rdp && getenv("DIAG"))
				printf("  hot refaults: from-prob long %ld short %ld | demoted "
				       "long %ld short %ld | prot(direct) long %ld short %ld | "
				       "first-in-trace %ld\n",
				       whyc[0][0], whyc[0][1], whyc[1][0], whyc[1][1], whyc[2][0],
				       whyc[2][1], whyc[3][0]);
			if (pol == &P_rr && getenv("DIAG"))
				printf("  RR: hot demoted %ld, cold promoted %ld, clock WP %ld, "
				       "compress %ld\n",
				       r_demhot, r_promcold, r_clkwp, s_compress);
			memset(whyc, 0, sizeof whyc);
			memset(seen2, 0, sizeof seen2);
			fflush(stdout);
		}
	}
	return 0;
}
