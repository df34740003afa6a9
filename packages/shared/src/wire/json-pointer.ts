/**
 * One reference token of a JSON Pointer (RFC 6901): `~` written `~0` and `/`
 * written `~1`, so that a member named `a/b` is `/a~1b`, not two levels.
 */
export function pointerSegment(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}
