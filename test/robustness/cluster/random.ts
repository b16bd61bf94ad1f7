/**
 * Choices made with a run's seeded random numbers (a function returning
 * numbers in [0, 1)), so that a seed reproduces which node, instance or
 * setting a fault picked.
 */

/** One of `items`, chosen with `random`; throws when there is none. */
export const pick = <A>(random: () => number, items: ReadonlyArray<A>): A => {
  const item = items[Math.floor(random() * items.length)]
  if (item === undefined) throw new Error("nothing to pick from")
  return item
}

/** A whole number in [low, high], chosen with `random`. */
export const between = (random: () => number, low: number, high: number): number =>
  low + Math.floor(random() * (high - low + 1))
