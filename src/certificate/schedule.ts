// When a certificate is renewed: upstream's certificate manager picks a deadline at a jittered
// 70–90% of the certificate's lifetime (NotBefore + d·(1 + 0.2·r) − 0.3·d for r in [0, 1)), so
// nodes issued at the same moment do not all come back at once.

/** The renewal deadline (ms since the epoch) for a certificate valid from `notBefore` to `notAfter`. */
export function nextRotationDeadline(notBefore: number, notAfter: number, random: () => number = Math.random): number {
  const total = notAfter - notBefore;
  if (total <= 0) return notBefore;
  const r = Math.min(Math.max(random(), 0), 1);
  return notBefore + Math.floor(total * (1 + 0.2 * r) - total * 0.3);
}
