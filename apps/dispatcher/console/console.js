/* global document, location, Node -- a browser module; the lint config gives every file Node's globals, which cover the rest */
// The Forge Fleet web console, served by the dispatcher at /ui (docs/http-api.md).
// A hand-written ES module with no build step: the dispatcher serves this file as it is.
// Everything the API answers is put on the page as text (textContent, text nodes), never as markup.

/** sessionStorage key of the bearer token: per tab, gone when the tab closes. */
const TOKEN_KEY = 'forge-console.token';
const REFRESH_MS = 2000;
/** Audit entries read per refresh; calls are grouped from these. */
const AUDIT_LIMIT = 500;
/** Calls shown in the recent-calls panel. */
const MAX_CALLS = 40;
/** Calls whose current status is fetched per refresh (final statuses are remembered, so this bounds only live ones). */
const MAX_STATUS_LOOKUPS = 20;
const FINAL_STATUSES = new Set(['completed', 'failed', 'cancelled']);

/** A refused or failed API request: the code and message of the JSON error body. */
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const byTestId = (id) => {
  const node = document.querySelector(`[data-testid="${id}"]`);
  if (node === null) throw new Error(`the page has no [data-testid="${id}"]`);
  return node;
};

/** Builds an element; children that are not nodes become text nodes, so API data is never parsed as HTML. */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'testid') node.dataset.testid = value;
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const time = (ms) => (Number.isFinite(ms) ? new Date(ms).toLocaleTimeString() : '—');
const json = (value) => JSON.stringify(value, null, 2);

function showError(node, error) {
  const code = error instanceof ApiError ? error.code : 'CONSOLE_ERROR';
  node.dataset.code = code;
  node.textContent = `${code}: ${error instanceof Error ? error.message : String(error)}`;
  node.hidden = false;
}

function hideError(node) {
  node.hidden = true;
  node.textContent = '';
  delete node.dataset.code;
}

// ---------------------------------------------------------------------------
// The API
// ---------------------------------------------------------------------------

const storedToken = () => sessionStorage.getItem(TOKEN_KEY);

async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const token = storedToken();
  // An empty token is a dev-mode visitor: no header, so the dispatcher serves the request anonymously.
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch (error) {
    throw new ApiError(0, 'UNREACHABLE', `the dispatcher did not answer ${method} ${path} (${error instanceof Error ? error.message : String(error)})`);
  }
  const text = await response.text();
  let data;
  try {
    data = text === '' ? undefined : JSON.parse(text);
  } catch {
    data = undefined;
  }
  if (!response.ok) {
    const error = data?.error;
    throw new ApiError(
      response.status,
      typeof error?.code === 'string' ? error.code : `HTTP_${response.status}`,
      typeof error?.message === 'string' ? error.message : text.slice(0, 300) || response.statusText,
    );
  }
  return data;
}

// ---------------------------------------------------------------------------
// Queues
// ---------------------------------------------------------------------------

function count(testid, value, alertWhen) {
  const cls = ['n', value === 0 ? 'zero' : '', alertWhen(value) ? 'alert' : ''].filter(Boolean).join(' ');
  return h('td', { class: cls, testid }, value);
}

async function refreshQueues() {
  const rows = byTestId('queues-rows');
  const error = byTestId('queues-error');
  try {
    const { queues, at } = await api('GET', '/v1/queues');
    hideError(error);
    rows.replaceChildren(
      ...queues.map((q) =>
        h(
          'tr',
          { testid: 'queue-row', 'data-lane': q.lane, 'data-tier': q.tier, 'data-pool': q.pool },
          h('td', { testid: 'queue-lane' }, q.lane),
          h('td', {}, h('code', {}, q.queue)),
          count('queue-waiting', q.waiting, () => false),
          count('queue-active', q.active, () => false),
          count('queue-delayed', q.delayed, () => false),
          count('queue-failed', q.failed, (n) => n > 0),
          // Jobs waiting with nobody to run them is what an operator must see first.
          count('queue-workers', q.workers, (n) => n === 0),
        ),
      ),
    );
    byTestId('queues-empty').hidden = queues.length > 0;
    byTestId('queues-at').textContent = `counts read at ${time(at)}`;
  } catch (e) {
    // Stale counts shown as current would mislead more than none.
    rows.replaceChildren();
    byTestId('queues-empty').hidden = true;
    showError(error, e);
  }
}

// ---------------------------------------------------------------------------
// Pending approvals
// ---------------------------------------------------------------------------

/** Cards by call id, kept across refreshes so a reason or an edit being typed survives them. */
const cards = new Map();

function untilText(deadline) {
  const left = deadline - Date.now();
  if (left <= 0) return 'deadline passed: it ends EXPIRED';
  const minutes = Math.floor(left / 60_000);
  const seconds = Math.floor((left % 60_000) / 1000);
  return `decide within ${minutes > 0 ? `${minutes} min ` : ''}${seconds} s (by ${time(deadline)})`;
}

/** The panel's line about the last decision made here; it outlives the card of the call it is about. */
function panelNotice(callId, text, failed) {
  const notice = byTestId('approvals-notice');
  notice.textContent = text;
  notice.dataset.callId = callId;
  notice.className = failed ? 'error' : 'notice';
  notice.hidden = false;
}

function approvalCard(a) {
  const error = h('p', { class: 'error', testid: 'approval-error', hidden: true });
  const deadline = h('span', { class: 'meta', testid: 'approval-deadline' }, untilText(a.deadline));
  const controls = [];
  const control = (node) => (controls.push(node), node);
  const setBusy = (busy) => controls.forEach((c) => (c.disabled = busy));

  const denyReason = control(h('input', { name: 'reason', required: true, maxlength: 2000, placeholder: 'why — the agent is told', testid: 'deny-reason' }));
  const editArguments = control(h('textarea', { name: 'arguments', spellcheck: 'false', testid: 'edit-arguments', 'aria-label': 'arguments (JSON)' }));
  editArguments.value = json(a.arguments);
  const editReason = control(h('input', { name: 'reason', maxlength: 2000, placeholder: 'reason (optional, audited)', testid: 'edit-reason' }));

  let denyForm;
  let editForm;
  const closeForms = () => {
    denyForm.hidden = true;
    editForm.hidden = true;
  };
  const open = (form, focus) => () => {
    closeForms();
    hideError(error);
    form.hidden = false;
    focus.focus();
  };

  async function decide(body) {
    setBusy(true);
    hideError(error);
    try {
      const view = await api('POST', `/v1/approvals/${encodeURIComponent(a.id)}`, body);
      closeForms();
      actions.hidden = true;
      // Said at the panel, not on the card: the card leaves at the next refresh, the call no longer waiting.
      const what = { approve: 'Approved', modify: 'Approved with edited arguments', deny: 'Denied' }[body.decision];
      panelNotice(a.id, `${what}: ${a.tool} ${a.id} is ${view.status} (${time(Date.now())}).`, false);
      refreshSoon();
    } catch (e) {
      // The call keeps waiting (an invalid edit, say): the person can correct and try again.
      showError(error, e);
      setBusy(false);
      // Decided elsewhere, expired or gone: the card leaves at the next refresh, so say it at the panel too.
      if (e instanceof ApiError && (e.status === 404 || e.status === 409)) panelNotice(a.id, `${a.tool} ${a.id}: ${e.code}: ${e.message}`, true);
    }
  }

  denyForm = h(
    'form',
    {
      hidden: true,
      testid: 'deny-form',
      onsubmit: (event) => {
        event.preventDefault();
        void decide({ decision: 'deny', reason: denyReason.value.trim() });
      },
    },
    denyReason,
    control(h('button', { type: 'submit', class: 'danger', testid: 'deny-confirm' }, 'Deny')),
    control(h('button', { type: 'button', onclick: closeForms }, 'Cancel')),
  );

  editForm = h(
    'form',
    {
      hidden: true,
      testid: 'edit-form',
      onsubmit: (event) => {
        event.preventDefault();
        let edited;
        try {
          edited = JSON.parse(editArguments.value);
        } catch (e) {
          showError(error, new Error(`the arguments are not JSON: ${e instanceof Error ? e.message : String(e)}`));
          return;
        }
        if (typeof edited !== 'object' || edited === null || Array.isArray(edited)) {
          showError(error, new Error('the arguments must be a JSON object'));
          return;
        }
        const reason = editReason.value.trim();
        void decide({ decision: 'modify', arguments: edited, ...(reason === '' ? {} : { reason }) });
      },
    },
    editArguments,
    editReason,
    control(h('button', { type: 'submit', class: 'primary', testid: 'edit-confirm' }, 'Approve with these arguments')),
    control(h('button', { type: 'button', onclick: closeForms }, 'Cancel')),
  );

  const actions = h(
    'div',
    { class: 'actions' },
    control(h('button', { type: 'button', class: 'primary', testid: 'approve', onclick: () => void decide({ decision: 'approve' }) }, 'Approve')),
    control(h('button', { type: 'button', class: 'danger', testid: 'deny', onclick: open(denyForm, denyReason) }, 'Deny…')),
    control(h('button', { type: 'button', testid: 'edit', onclick: open(editForm, editArguments) }, 'Edit arguments…')),
  );

  const node = h(
    'article',
    { class: 'approval', testid: 'approval', 'data-call-id': a.id },
    h(
      'div',
      { class: 'head' },
      h('span', { class: 'tool', testid: 'approval-tool' }, a.tool),
      h('code', { class: 'meta', testid: 'approval-id' }, a.id),
      h('span', { class: 'meta' }, 'caller ', h('span', { testid: 'approval-caller' }, a.caller ?? 'anonymous')),
      h('span', { class: 'meta' }, 'scope ', h('span', { testid: 'approval-scope' }, a.scope)),
      h('span', { class: 'meta' }, `submitted ${time(a.createdAt)}`),
    ),
    h('div', { class: 'meta', testid: 'approval-reason' }, a.reason),
    h('pre', { testid: 'approval-arguments' }, json(a.arguments)),
    deadline,
    actions,
    denyForm,
    editForm,
    error,
  );
  return { node, update: () => (deadline.textContent = untilText(a.deadline)) };
}

async function refreshApprovals() {
  const list = byTestId('approvals-list');
  const error = byTestId('approvals-error');
  try {
    const { approvals } = await api('GET', '/v1/approvals');
    hideError(error);
    const pending = new Set(approvals.map((a) => a.id));
    for (const [id, card] of cards) {
      if (!pending.has(id)) {
        card.node.remove();
        cards.delete(id);
      }
    }
    approvals.forEach((a, i) => {
      let card = cards.get(a.id);
      if (card === undefined) {
        card = approvalCard(a);
        cards.set(a.id, card);
      }
      card.update();
      // Moved only when out of place: moving a node would take the focus from a reason being typed.
      if (list.children[i] !== card.node) list.insertBefore(card.node, list.children[i] ?? null);
    });
    byTestId('approvals-empty').hidden = approvals.length > 0;
    byTestId('approvals-count').textContent = approvals.length > 0 ? `${approvals.length} waiting, nearest deadline first` : '';
  } catch (e) {
    // The cards stay: a reason or an edit being typed outlives a failed refresh, and a decision on a call
    // that meanwhile stopped waiting is refused on its card (NOT_AWAITING_APPROVAL).
    byTestId('approvals-empty').hidden = true;
    showError(error, e);
  }
}

// ---------------------------------------------------------------------------
// Recent calls and their audit trails
// ---------------------------------------------------------------------------

/** Current views by call id: final ones are kept (they never change), live ones fetched again each refresh. */
const views = new Map();
/** Table rows by call id, updated in place so a click never lands on a row being replaced. */
const callRows = new Map();
let selectedCallId;

/** Audit entries (newest first) grouped per call, the call with the most recent entry first. */
function groupByCall(entries) {
  const calls = new Map();
  for (const entry of entries) {
    if (typeof entry.callId !== 'string') continue;
    let call = calls.get(entry.callId);
    if (call === undefined) {
      call = { id: entry.callId, entries: [] };
      calls.set(entry.callId, call);
    }
    call.entries.push(entry);
  }
  return [...calls.values()].map((call) => {
    const field = (name) => call.entries.find((e) => e[name] !== undefined)?.[name];
    return { ...call, latest: call.entries[0], first: call.entries.at(-1), tool: field('tool'), tier: field('tier'), caller: field('caller') };
  });
}

const decisionOf = (entry) => entry.decision ?? 'rejected';
const decisionText = (entry) => [decisionOf(entry), entry.category, entry.code].filter(Boolean).join(' · ');

/** Fetches the current view of the calls that may still change; a call refused at admission has no record to fetch. */
async function lookUpViews(calls) {
  const live = calls.filter((c) => decisionOf(c.latest) !== 'rejected' && !FINAL_STATUSES.has(views.get(c.id)?.status)).slice(0, MAX_STATUS_LOOKUPS);
  await Promise.all(
    live.map(async (c) => {
      try {
        views.set(c.id, await api('GET', `/v1/calls/${encodeURIComponent(c.id)}`));
      } catch (e) {
        views.set(c.id, { error: e });
      }
    }),
  );
  // Forget calls that left the list.
  const shown = new Set(calls.map((c) => c.id));
  for (const id of views.keys()) if (!shown.has(id)) views.delete(id);
}

function statusText(call) {
  const view = views.get(call.id);
  if (view === undefined) return decisionOf(call.latest) === 'rejected' ? 'never ran' : '…';
  if (view.error !== undefined) return view.error.code === 'CALL_NOT_FOUND' ? 'no record' : view.error.code;
  return view.status;
}

function callRow(id) {
  const cell = (testid) => h('td', { testid });
  const cells = {
    tool: cell('call-tool'),
    tier: cell('call-tier'),
    caller: cell('call-caller'),
    decision: cell('call-decision'),
    status: cell('call-status'),
    first: cell('call-first'),
    last: cell('call-last'),
  };
  const open = h('button', { type: 'button', class: 'link', title: id, testid: 'call-open', onclick: () => void select(id) }, id);
  const tr = h('tr', { testid: 'call-row', 'data-call-id': id }, h('td', {}, open), ...Object.values(cells));
  return { tr, cells };
}

function renderCalls(calls) {
  const rows = byTestId('calls-rows');
  const shown = new Set(calls.map((c) => c.id));
  for (const [id, row] of callRows) {
    if (!shown.has(id)) {
      row.tr.remove();
      callRows.delete(id);
    }
  }
  calls.forEach((call, i) => {
    let row = callRows.get(call.id);
    if (row === undefined) {
      row = callRow(call.id);
      callRows.set(call.id, row);
    }
    const { cells } = row;
    const status = statusText(call);
    cells.tool.textContent = call.tool ?? '—';
    cells.tier.textContent = call.tier ?? '—';
    cells.caller.textContent = call.caller ?? 'anonymous';
    cells.decision.textContent = decisionText(call.latest);
    cells.decision.className = `decision-${decisionOf(call.latest)}`;
    cells.status.textContent = status;
    cells.status.className = `status-${status}`;
    cells.first.textContent = time(Date.parse(call.first.at));
    cells.last.textContent = `${time(Date.parse(call.latest.at))} (+${((Date.parse(call.latest.at) - Date.parse(call.first.at)) / 1000).toFixed(1)} s)`;
    row.tr.classList.toggle('selected', call.id === selectedCallId);
    if (rows.children[i] !== row.tr) rows.insertBefore(row.tr, rows.children[i] ?? null);
  });
  byTestId('calls-empty').hidden = calls.length > 0;
}

function definition(term, value, testid) {
  return [h('dt', {}, term), h('dd', { testid }, value)];
}

function viewFacts(view, refusedAtAdmission) {
  if (view.error !== undefined) {
    // A call refused at admission never had a record (and a record is dropped after FORGE_RESULT_RETENTION_MS).
    if (view.error.code === 'CALL_NOT_FOUND' && refusedAtAdmission) return definition('status', 'refused at admission: it never ran', 'detail-status');
    return definition('status', `${view.error.code}: ${view.error.message}`, 'detail-status');
  }
  const facts = [...definition('status', view.status, 'detail-status')];
  if (view.reason !== undefined) facts.push(...definition('waiting because', view.reason, 'detail-reason'));
  if (view.progress !== undefined) {
    const { progress, total, message } = view.progress;
    facts.push(...definition('progress', `${progress}${total === undefined ? '' : ` / ${total}`}${message === undefined ? '' : ` — ${message}`}`, 'detail-progress'));
  }
  if (view.result !== undefined) {
    const r = view.result;
    // `content` is the text blocks' text only: an image or audio result has none, so the blocks are what it returned.
    const blocks = Array.isArray(r.blocks) ? blockList(r.blocks) : undefined;
    let shown;
    if (r.isError && r.error !== undefined) shown = h('pre', {}, `${r.error.code}: ${r.error.message}`);
    // A tool that returned an object has it as JSON text in `content` too; the object reads better.
    else if (r.structuredContent !== undefined) shown = h('pre', {}, json(r.structuredContent));
    else shown = blocks ?? h('pre', {}, r.content);
    facts.push(...definition(r.isError ? 'error' : 'result', shown, 'detail-result'));
    // Beside an error or an object, the blocks are listed too: nothing the tool gave goes unmentioned.
    if (blocks !== undefined && shown !== blocks) facts.push(...definition('content', blocks, 'detail-content'));
  }
  return facts;
}

/** Bytes of base64 data, decoded (what a person wants to know of an image, not its text). */
function base64Bytes(data) {
  const text = String(data ?? '').replace(/\s+/g, '');
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((text.length * 3) / 4) - padding);
}

/**
 * One content block as `forge call` prints it (apps/cli's blockLine): a text
 * block as its text, any other as one short bracketed line
 * (`[image image/png, 1234 bytes]`); the data itself is in the API's view.
 */
function blockLine(block) {
  switch (block?.type) {
    case 'text':
      return String(block.text);
    case 'image':
    case 'audio':
      return `[${block.type} ${String(block.mimeType)}, ${base64Bytes(block.data)} bytes]`;
    case 'resource_link':
      return `[resource_link ${String(block.uri)}${typeof block.mimeType === 'string' ? ` ${block.mimeType}` : ''}, ${String(block.name)}]`;
    case 'resource': {
      const r = block.resource ?? {};
      const type = typeof r.mimeType === 'string' ? ` ${r.mimeType}` : '';
      const size = typeof r.text === 'string' ? `${new TextEncoder().encode(r.text).length} bytes of text` : `${base64Bytes(r.blob)} bytes`;
      return `[resource ${String(r.uri)}${type}, ${size}]`;
    }
    default:
      // The worker lets only these kinds through; a newer one is still mentioned rather than dropped.
      return `[${String(block?.type)} block]`;
  }
}

/** A result's content blocks, in order, one line each; every line is a text node (names and URIs come from the tool). */
function blockList(blocks) {
  return h(
    'div',
    { class: 'blocks', testid: 'detail-blocks' },
    blocks.map((block) => h('pre', { class: block?.type === 'text' ? 'block' : 'block other', testid: 'detail-block', 'data-type': String(block?.type) }, blockLine(block))),
  );
}

function trailRow(e) {
  const args = e.editedArguments !== undefined ? `${json(e.arguments)}\n→ ${json(e.editedArguments)}` : e.arguments !== undefined ? json(e.arguments) : undefined;
  return h(
    'tr',
    { testid: 'trail-row', 'data-decision': decisionOf(e) },
    h('td', {}, time(Date.parse(e.at))),
    h('td', { class: `decision-${decisionOf(e)}`, testid: 'trail-decision' }, [decisionOf(e), e.category].filter(Boolean).join(' · ')),
    h('td', {}, e.code ?? ''),
    h('td', {}, e.decidedBy === undefined ? (e.caller ?? '') : `${e.decidedBy} (decided)`),
    h('td', {}, e.reason ?? ''),
    h('td', {}, args === undefined ? '' : h('pre', {}, args)),
  );
}

function renderDetail(id, trail, view) {
  byTestId('call-detail').hidden = false;
  byTestId('detail-id').textContent = id;
  const error = byTestId('detail-error');
  if (trail.error === undefined) hideError(error);
  else showError(error, trail.error);
  const call = trail.error === undefined ? trail.call : undefined;
  byTestId('detail-view').replaceChildren(
    ...definition('tool', `${call?.tool ?? '—'} (${call?.tier ?? 'tier unknown'})`, 'detail-tool'),
    ...definition('caller', call?.caller ?? 'anonymous', 'detail-caller'),
    ...viewFacts(view, call !== undefined && decisionOf(call.latest) === 'rejected'),
  );
  // Oldest first: a trail reads in the order things happened.
  byTestId('detail-trail').replaceChildren(...(call === undefined ? [] : [...call.entries].reverse().map(trailRow)));
}

/** The selected call: its whole audit trail (not only the entries the list read) and its current view. */
async function refreshDetail() {
  const id = selectedCallId;
  if (id === undefined) return;
  const [trail, view] = await Promise.all([
    api('GET', `/v1/audit?callId=${encodeURIComponent(id)}&limit=1000`).then(
      ({ entries }) => ({ call: groupByCall(entries)[0] }),
      (error) => ({ error }),
    ),
    api('GET', `/v1/calls/${encodeURIComponent(id)}`).catch((error) => ({ error })),
  ]);
  // Another row may have been picked while this one was fetched.
  if (id === selectedCallId) renderDetail(id, trail, view);
}

async function select(id) {
  selectedCallId = id;
  for (const [rowId, row] of callRows) row.tr.classList.toggle('selected', rowId === id);
  await refreshDetail();
}

async function refreshCalls() {
  const error = byTestId('calls-error');
  try {
    const { entries } = await api('GET', `/v1/audit?limit=${AUDIT_LIMIT}`);
    const calls = groupByCall(entries).slice(0, MAX_CALLS);
    await lookUpViews(calls);
    hideError(error);
    renderCalls(calls);
    if (selectedCallId !== undefined) await refreshDetail();
  } catch (e) {
    // An approver may not read the audit stream (admins only): this panel says so, the others go on.
    renderCalls([]);
    byTestId('calls-empty').hidden = true;
    byTestId('call-detail').hidden = true;
    showError(error, e);
  }
}

// ---------------------------------------------------------------------------
// Refreshing, signing in
// ---------------------------------------------------------------------------

let timer;
let refreshing = false;
let again = false;

async function refresh() {
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = true;
  clearTimeout(timer);
  try {
    await Promise.all([refreshQueues(), refreshApprovals(), refreshCalls()]);
    byTestId('refreshed-at').textContent = time(Date.now());
  } finally {
    refreshing = false;
    if (again) {
      again = false;
      refreshSoon();
    } else {
      // Scheduled after the previous refresh ended, so a slow dispatcher is never asked twice at once.
      timer = setTimeout(refreshSoon, REFRESH_MS);
    }
  }
}

/** Refreshes now (after an action), or right after the refresh under way. */
function refreshSoon() {
  void refresh();
}

/** The token's claims, to say who is signed in. Not verified here: the dispatcher verifies every request. */
function claimsOf(token) {
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(payload), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

function whoAmI(token) {
  if (token === '') return 'no token: anonymous (dev mode only)';
  const claims = claimsOf(token);
  if (claims === undefined) return 'token set (not a JWT this page can read)';
  const expires = typeof claims.exp === 'number' ? `, expires ${new Date(claims.exp * 1000).toLocaleString()}` : '';
  return `${String(claims.sub ?? '?')} (${String(claims.role ?? 'agent')})${expires}`;
}

function start(token) {
  byTestId('sign-in').hidden = true;
  byTestId('console').hidden = false;
  byTestId('sign-out').hidden = false;
  byTestId('whoami').textContent = whoAmI(token);
  refreshSoon();
}

byTestId('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  // People paste the whole header value as often as the token.
  const token = byTestId('token-input').value.trim().replace(/^Bearer\s+/i, '');
  sessionStorage.setItem(TOKEN_KEY, token);
  byTestId('token-input').value = '';
  start(token);
});

byTestId('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  // A fresh page: no card, row or timer of the previous token survives.
  location.reload();
});

const token = storedToken();
if (token === null) {
  byTestId('sign-in').hidden = false;
  byTestId('token-input').focus();
} else {
  start(token);
}
