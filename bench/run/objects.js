// A workload of zmem runbench (and the run tests): Node building a large
// array of objects, then reading it back.
//
//   node objects.js N     N objects (default 1500000)
//
// Each object has an id, a name, a short array of tags, a text field of
// words from a small vocabulary and two numbers, made by a seeded
// generator (xorshift32): the same N gives the same objects and the same
// output on every run.  After the build: lookups in a seeded order, a
// third of them updating their object, then every object folded into an
// FNV-1a hash in order.  Prints the count and the hash.
'use strict';

const WORDS = ('the of and to in is that for it as was with be by on not he this are or ' +
  'his from at which but have an they you were her she there been one all ' +
  'would their we him has when who will more no if out so said what up its ' +
  'about into than them can only other new some time could these two may ' +
  'first then do any like my now over such our man me even most made after ' +
  'also did many before must through back years where much your way well').split(' ');

let s = 20261205;
function rnd() {
  s ^= s << 13; s >>>= 0;
  s ^= s >>> 17;
  s ^= s << 5; s >>>= 0;
  return s;
}

function fnv(h, str) {
  for (let i = 0; i < str.length; i++) {
    h ^= str.charCodeAt(i);
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h;
}

const n = process.argv.length > 2 ? parseInt(process.argv[2], 10) : 1500000;
const a = new Array(n);
for (let i = 0; i < n; i++) {
  const m = 6 + rnd() % 20;
  const w = [];
  for (let k = 0; k < m; k++)
    w.push(WORDS[rnd() % WORDS.length]);
  a[i] = {
    id: i,
    name: 'user' + (rnd() % 1000000),
    tags: [WORDS[rnd() % WORDS.length], WORDS[rnd() % WORDS.length]],
    text: w.join(' '),
    score: rnd() % 1000,
    weight: (rnd() % 100000) / 100,
  };
}
let total = 0;
for (let i = 0; i < n; i++) {
  const o = a[rnd() % n];
  total += o.text.length + o.score;
  if (rnd() % 3 === 0) {
    o.score = (o.score * 7 + 1) % 1000;
    o.tags.push(o.name);
  }
}
let h = 2166136261;
for (let i = 0; i < n; i++) {
  const o = a[i];
  h = fnv(h, o.id + ' ' + o.name + ' ' + o.tags.join(',') + ' ' + o.text + ' ' +
    o.score + ' ' + o.weight.toFixed(2));
}
console.log('objects ' + n + ' looked-up ' + total + ' fnv1a ' + h.toString(16));
