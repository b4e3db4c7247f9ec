/**
 * Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, in 32-bit
 * two's-complement arithmetic. RocketMQ stores this value as a message's tag code and uses it to
 * pick a queue by sharding key, so it must match Java bit for bit.
 */
export function javaStringHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(h, 31) + s.charCodeAt(i)) | 0;
  return h;
}
