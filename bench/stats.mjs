// Small statistics helpers for the benchmarks.
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
export const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
export const summarize = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), samples: xs });
/**
 * Jain's fairness index of the shares `xs`: (Σx)² / (n·Σx²). 1 when every share is equal,
 * 1/n when one takes everything; 0 when there is nothing to share.
 */
export const jainIndex = (xs) => {
  const sum = xs.reduce((a, x) => a + x, 0);
  const squares = xs.reduce((a, x) => a + x * x, 0);
  return squares === 0 ? 0 : (sum * sum) / (xs.length * squares);
};
