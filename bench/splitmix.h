/* splitmix64 (Steele, Lea and Flood), for C and C++: the random numbers and the derived bytes of
 * tiermem-hotset-prog (plain C, which includes nothing else of the project) and of the memcached
 * client. */
#pragma once

#include <stdint.h>

/* The finaliser: a 64-bit mix of x. */
static inline uint64_t SplitMix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* The generator: the next number of the sequence whose state is *s. */
static inline uint64_t SplitMix64Next(uint64_t* s) {
  *s += 0x9e3779b97f4a7c15ull;
  return SplitMix64(*s);
}
