/** The benchmark's tool: does nothing, so what is measured is the fleet itself. */
import { defineTool } from '@forge-fleet/shared';

export default [defineTool({ name: 'noop', description: 'Returns {"ok": true}.', tier: 'platform', handler: () => ({ ok: true }) })];
