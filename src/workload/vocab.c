/*
 * The vocabulary of the text generator: common English words, most frequent
 * first, drawn with a Zipf-like law, p(rank) ~ 1 / (rank + Q), as words are
 * in real text (a few words make up much of it, most words are rare).
 *
 * Sampling inverts the continuous law, rank = Q * ((N + Q) / Q)^u - Q for u
 * uniform in [0, 1), without an exp() per word: the rank where each u
 * starts is computed once (start[]), a table indexed by the top bits of u
 * gives the first candidate rank, and a short walk (usually no step) along
 * start[] finds the exact one.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "workload/workload_internal.h"

/* Q flattens the head of the law: with Q = 2.7 "the" is about 6% of words,
 * close to its share in English prose. */
#define ZIPF_Q 2.7

static const char *const words[] = {
	"the", "of", "and", "to", "a", "in", "is", "that", "it", "was",
	"for", "on", "are", "as", "with", "his", "they", "at", "be", "this",
	"from", "have", "or", "by", "one", "had", "not", "but", "what", "all",
	"were", "when", "we", "there", "can", "an", "your", "which", "their", "said",
	"if", "do", "will", "each", "about", "how", "up", "out", "them", "then",
	"she", "many", "some", "so", "these", "would", "other", "into", "has", "more",
	"her", "two", "like", "him", "see", "time", "could", "no", "make", "than",
	"first", "been", "its", "who", "now", "people", "my", "made", "over", "did",
	"down", "only", "way", "find", "use", "may", "water", "long", "little", "very",
	"after", "words", "called", "just", "where", "most", "know", "get", "through", "back",
	"much", "before", "go", "good", "new", "write", "our", "used", "me", "man",
	"too", "any", "day", "same", "right", "look", "think", "also", "around", "another",
	"came", "come", "work", "three", "word", "must", "because", "does", "part", "even",
	"place", "well", "such", "here", "take", "why", "things", "help", "put", "years",
	"different", "away", "again", "off", "went", "old", "number", "great", "tell", "men",
	"say", "small", "every", "found", "still", "between", "name", "should", "home", "big",
	"give", "air", "line", "set", "own", "under", "read", "last", "never", "us",
	"left", "end", "along", "while", "might", "next", "sound", "below", "saw", "something",
	"thought", "both", "few", "those", "always", "looked", "show", "large", "often", "together",
	"asked", "house", "world", "going", "want", "school", "important", "until", "form", "food",
	"keep", "children", "feet", "land", "side", "without", "boy", "once", "animals", "life",
	"enough", "took", "sometimes", "four", "head", "above", "kind", "began", "almost", "live",
	"page", "got", "earth", "need", "far", "hand", "high", "year", "mother", "light",
	"parts", "country", "father", "let", "night", "following", "picture", "being", "study", "second",
	"eyes", "soon", "times", "story", "boys", "since", "white", "days", "ever", "paper",
	"hard", "near", "sentence", "better", "best", "across", "during", "today", "others", "however",
	"sure", "means", "knew", "try", "told", "young", "miles", "sun", "ways", "thing",
	"whole", "hear", "example", "heard", "several", "change", "answer", "room", "sea", "against",
	"top", "turned", "learn", "point", "city", "play", "toward", "five", "using", "himself",
	"usually", "money", "seen", "car", "morning", "given", "body", "family", "later", "turn",
	"move", "face", "door", "cut", "done", "group", "true", "half", "red", "fish",
	"plants", "living", "black", "eat", "short", "river", "state", "run", "book", "gave",
	"order", "open", "ground", "cold", "really", "table", "remember", "tree", "course", "front",
	"american", "space", "inside", "ago", "certain", "problem", "voice", "market", "power", "system",
	"matter", "question", "fire", "color", "town", "reason", "field", "early", "moment", "street",
	"history", "special", "whether", "already", "minutes", "figure", "interest", "letter", "government", "company",
	"business", "service", "result", "research", "value", "general", "public", "process", "report", "policy",
	"level", "language", "memory", "program", "data", "information", "development", "community", "period", "society",
	"building", "evidence", "experience", "character", "position", "attention", "century", "office", "ready", "stood",
	"understand", "speak", "window", "quickly", "fell", "slowly", "behind", "beside", "beautiful", "simple",
	"strong", "possible", "clear", "quiet", "happy", "green", "common", "free", "full", "dark",
	"north", "south", "east", "west", "summer", "winter", "spring", "autumn", "garden", "forest",
	"mountain", "island", "village", "kitchen", "bread", "wood", "stone", "glass", "iron", "gold",
	"horse", "dog", "bird", "ship", "train", "road", "bridge", "church", "king", "queen",
	"doctor", "teacher", "student", "friend", "brother", "sister", "woman", "girl", "child", "person",
	"idea", "reader", "writer", "chapter", "music", "song", "dream", "heart", "mind", "truth",
	"war", "peace", "law", "court", "army", "party", "member", "election", "president", "minister",
	"walked", "carried", "opened", "closed", "watched", "followed", "returned", "wanted", "lived", "happened",
	"believe", "suppose", "appear", "remain", "consider", "provide", "include", "continue", "describe", "require",
	"rather", "perhaps", "quite", "nearly", "indeed", "probably", "therefore", "although", "either", "neither",
	"within", "beyond", "among", "upon", "except", "beneath", "throughout", "despite", "towards", "whose",
	"evening", "afternoon", "week", "month", "hour", "minute", "season", "future", "past", "present",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

/* Buckets of the lookup table: 4096 buckets of u, each narrower than the
 * rarest word's share (1/2800), so the walk is at most a step or two. */
#define BUCKET_BITS 12
#define NBUCKETS (1u << BUCKET_BITS)

static pthread_once_t vocab_once = PTHREAD_ONCE_INIT;
static uint64_t start[NWORDS + 1];   /* u (as 2^64 fraction) where rank begins */
static uint16_t bucket[NBUCKETS];    /* last rank starting at or before bucket */
static uint8_t wlen[NWORDS];

static void vocab_init(void)
{
	const double span = log((NWORDS + ZIPF_Q) / ZIPF_Q);
	size_t r = 0;

	for (size_t i = 0; i <= NWORDS; i++) {
		/* rank i begins where Q * e^(u * span) - Q = i */
		double u = log((i + ZIPF_Q) / ZIPF_Q) / span;

		start[i] = i == 0 ? 0 : i == NWORDS ? UINT64_MAX :
			   (uint64_t)(u * 18446744073709551616.0);
	}
	for (size_t b = 0; b < NBUCKETS; b++) {
		uint64_t u = (uint64_t)b << (64 - BUCKET_BITS);

		while (r + 1 < NWORDS && start[r + 1] <= u)
			r++;
		bucket[b] = (uint16_t)r;
	}
	for (size_t i = 0; i < NWORDS; i++)
		wlen[i] = (uint8_t)strlen(words[i]);
}

const char *vocab_word(struct workload_rng *rng, size_t *len)
{
	uint64_t u = workload_rng_next(rng);
	size_t r;

	pthread_once(&vocab_once, vocab_init);
	r = bucket[u >> (64 - BUCKET_BITS)];
	while (r + 1 < NWORDS && start[r + 1] <= u)
		r++;
	*len = wlen[r];
	return words[r];
}
