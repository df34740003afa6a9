/** The benchmark's tools: `noop` does nothing, so what is measured is the fleet itself; `echo_id` lets the soak check every answer. */
import { defineTool } from '@forge-fleet/shared';

export default [
  defineTool({ name: 'noop', description: 'Returns {"ok": true}.', tier: 'platform', handler: () => ({ ok: true }) }),
  defineTool({
    name: 'echo_id',
    description: 'Returns its call id and its argument n: a result answering the wrong call would show.',
    tier: 'platform',
    parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    handler: (args, ctx) => ({ id: ctx.call.id, n: args.n }),
  }),
];
