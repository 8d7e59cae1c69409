// Owns the timeout race used wherever a dependency (store, database, SMTP) may stall.

/**
 * Settles like `promise`, or rejects with `Error(message)` after `ms`; the timer never keeps the process alive.
 * Written with one promise and one timer: it wraps every per-request store count (http/rate-limit.ts), where
 * `Promise.race` plus `finally` cost three promises and their reactions per call.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, message = 'timeout'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
