// createTurnBatch (infra/turn-batch.ts): the items of one turn of the event loop go to `send` together, in groups of
// at most `max`, each item settled with its own result or its group's error.
import { describe, expect, it } from 'vitest';
import { createTurnBatch } from '../../src/infra/turn-batch.js';

describe('turn batch', () => {
  it('sends the items of one turn together, in bounded groups, and answers each with its own result', async () => {
    const groups: number[][] = [];
    const batch = createTurnBatch(async (group: number[]) => {
      groups.push(group);
      return group.map((n) => n * 10);
    }, 4);
    const first = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => batch.add(n)));
    expect(first).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
    expect(groups).toEqual([
      [1, 2, 3, 4],
      [5, 6, 7, 8],
      [9, 10],
    ]);
    // A later turn is a group of its own; `now` does not wait for the turn and goes alone, first.
    const later = Promise.all([batch.add(11), batch.now(12), batch.add(13)]);
    expect(await later).toEqual([110, 120, 130]);
    expect(groups.slice(3)).toEqual([[12], [11, 13]]);
  });

  it('fails only the items of the group that failed, whether send rejects or throws', async () => {
    const batch = createTurnBatch((group: number[]) => {
      if (group.includes(3)) throw new Error('thrown');
      if (group.includes(6)) return Promise.reject(new Error('rejected'));
      return Promise.resolve(group.map((n) => -n));
    }, 2);
    const settled = await Promise.allSettled([1, 2, 3, 4, 5, 6].map((n) => batch.add(n)));
    expect(settled.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      -1,
      -2,
      'thrown',
      'thrown',
      'rejected',
      'rejected',
    ]);
    // The batch keeps working after a failed group.
    expect(await batch.add(7)).toBe(-7);
  });
});
