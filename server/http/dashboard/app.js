// Parity's dashboard: one page over parityd's JSON API (/api/v1). The URL holds the state
// (the view in the path, filters, sort and page in the query), so a link can be shared.
// Nothing from the data is ever parsed as HTML: every text goes through textContent.
'use strict';

const VERDICTS = ['PASS', 'WARN', 'FAIL', 'ERROR', 'UNMATCHED', 'SKIPPED'];
const PAGE_SIZE = 50;
const main = document.getElementById('main');
let live = null;  // the open event stream of a running job's page: {abort, timer}

// ---- helpers ---------------------------------------------------------------------------------

// An element with attributes and children (strings become text nodes, never HTML).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function link(href, ...children) { return el('a', {href, 'data-nav': true}, ...children); }

function token() { return sessionStorage.getItem('parity-token') || ''; }

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body ? body.code : 0;
  }
}

// GET (or POST with a body) on the API; the JSON answer, or an ApiError.
async function api(path, params) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (Array.isArray(v)) v.forEach((x) => url.searchParams.append(k, x));
    else if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  const res = await fetch(url, {headers});
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

function num(v) {
  if (v === undefined || v === null) return NaN;
  if (typeof v === 'number') return v;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  return Number(v);
}

function fmt(v) {
  const n = num(v);
  if (Number.isNaN(n)) return typeof v === 'string' && v !== 'NaN' ? v : 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  if (Number.isInteger(n)) return String(n);
  return Math.abs(n) >= 1e-3 && Math.abs(n) < 1e6 ? n.toPrecision(6).replace(/\.?0+$/, '') : n.toExponential(4);
}

function metricText(m) {
  if ('number' in m) return fmt(m.number);
  if ('integer' in m) return String(m.integer);
  if ('text' in m) return m.text;
  return '';
}

function metricsOf(r) {
  const out = {};
  for (const m of r.metrics || []) out[m.name] = m;
  return out;
}

function verdictName(v) { return (v || '').replace(/^VERDICT_/, ''); }
function stateName(s) { return (s || '').replace(/^JOB_STATE_/, ''); }
function policyName(p) { return (p || '').replace(/^POLICY_/, '').toLowerCase(); }
function when(ms) { const n = num(ms); return n > 0 ? new Date(n).toLocaleString() : ''; }

// The job's policy as set, else the one its results were compared under (msprobe by default).
function jobPolicy(job, rows) {
  const set = policyName(job.config && job.config.policy);
  if (set && set !== 'unspecified') return set;
  return rows.length ? policyName(rows[0].policy) : 'msprobe';
}

function verdictCell(v) { const n = verdictName(v); return el('td', {class: 'v-' + n}, n); }

function errorBox(e) {
  return el('div', {class: 'error-box', role: 'alert'},
            e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(e));
}

function crumbs(...parts) {
  const nav = document.getElementById('crumbs');
  nav.replaceChildren(...parts.map((p) => (Array.isArray(p) ? link(p[1], p[0]) : el('span', {}, p))));
}

function navigate(href) {
  history.pushState(null, '', href);
  render();
}

// The current URL with `changes` to its query (null or '' removes a key).
function withQuery(changes) {
  const u = new URL(location.href);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === '') u.searchParams.delete(k);
    else u.searchParams.set(k, v);
  }
  return u.pathname + u.search;
}

function stopLive() {
  if (live) {
    live.abort.abort();
    clearTimeout(live.timer);
    live = null;
  }
}

// ---- views -----------------------------------------------------------------------------------

function jobsTable(jobs) {
  return el('table', {id: 'jobs'},
    el('thead', {}, el('tr', {}, ['Job', 'State', 'Golden', 'Target', 'Pairs', ...VERDICTS.slice(0, 5), 'First culprit', 'Created']
      .map((h) => el('th', {class: VERDICTS.includes(h) || h === 'Pairs' ? 'num' : ''}, h)))),
    el('tbody', {}, jobs.map((j) => {
      const c = j.counts || {};
      return el('tr', {},
        el('td', {}, link('/jobs/' + encodeURIComponent(j.jobId), j.jobId)),
        el('td', {}, stateName(j.state)),
        el('td', {class: 'name'}, j.goldenRunName || j.goldenRunId),
        el('td', {class: 'name'}, j.targetRunName || j.targetRunId),
        el('td', {class: 'num'}, `${j.pairsDone}/${j.pairsTotal}`),
        ['pass', 'warn', 'fail', 'error', 'unmatched'].map((k, i) => el('td', {class: 'num v-' + VERDICTS[i]}, c[k] || '0')),
        el('td', {class: 'name v-FAIL'}, j.firstCulprit || ''),
        el('td', {}, when(j.createdAtMs)));
    })));
}

async function homeView() {
  crumbs('Projects');
  const [runs, jobs] = await Promise.all([api('/api/v1/runs', {page_size: 1000}), api('/api/v1/jobs', {page_size: 100})]);
  const projects = new Map();
  for (const r of runs.runs || []) {
    const p = r.metadata.project;
    const e = projects.get(p) || {runs: 0, jobs: 0, latest: 0};
    e.runs++;
    e.latest = Math.max(e.latest, num(r.createdAtMs));
    projects.set(p, e);
  }
  for (const j of jobs.jobs || []) {
    const e = projects.get(j.project) || {runs: 0, jobs: 0, latest: 0};
    e.jobs++;
    projects.set(j.project, e);
  }
  main.replaceChildren(
    el('h1', {}, 'Projects'),
    projects.size === 0 ? el('p', {class: 'muted'}, 'No runs yet: upload a dump with parity-agent.') :
      el('table', {id: 'projects'}, el('thead', {}, el('tr', {}, el('th', {}, 'Project'), el('th', {class: 'num'}, 'Runs'),
                                                             el('th', {class: 'num'}, 'Recent jobs'), el('th', {}, 'Latest run'))),
        el('tbody', {}, [...projects].map(([p, e]) => el('tr', {},
          el('td', {}, link('/projects/' + encodeURIComponent(p), p)), el('td', {class: 'num'}, e.runs),
          el('td', {class: 'num'}, e.jobs), el('td', {}, when(e.latest)))))),
    el('h2', {}, 'Recent jobs'), jobsTable(jobs.jobs || []));
}

async function projectView(project) {
  crumbs(['Projects', '/'], project);
  const [runs, jobs] = await Promise.all([api(`/api/v1/projects/${encodeURIComponent(project)}/runs`, {page_size: 200}),
                                          api(`/api/v1/projects/${encodeURIComponent(project)}/jobs`, {page_size: 200})]);
  main.replaceChildren(
    el('h1', {}, project),
    el('h2', {}, 'Jobs'), jobsTable(jobs.jobs || []),
    el('h2', {}, 'Runs'),
    el('table', {id: 'runs'},
      el('thead', {}, el('tr', {}, ['Run', 'Side', 'Model', 'Labels', 'Structure', 'Items', 'Created'].map((h) => el('th', {}, h)))),
      el('tbody', {}, (runs.runs || []).map((r) => el('tr', {},
        el('td', {class: 'name'}, r.metadata.name || r.runId, el('div', {class: 'muted'}, r.runId)),
        el('td', {}, (r.metadata.side || '').replace(/^SIDE_/, '').toLowerCase()),
        el('td', {class: 'name'}, r.metadata.model || ''),
        el('td', {class: 'name'}, Object.entries(r.metadata.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ')),
        el('td', {class: 'name muted'}, (r.structureHash || '').slice(0, 12)),
        el('td', {class: 'num'}, r.itemCount),
        el('td', {}, when(r.createdAtMs)))))));
}

// The plot of one or more series along dump order: min/max band per bucket, the threshold, the
// culprits. `series`: [{label, data (JobSeries), color}].
function plot(canvas, series) {
  const datasets = [];
  let total = 0;
  for (const s of series) {
    total = Math.max(total, num(s.data.total));
    const mid = (b) => num(b.first) + Math.max(num(b.count) - 1, 0) / 2;
    const pts = (s.data.buckets || []).filter((b) => num(b.withValue) > 0);
    datasets.push({label: `${s.label} max`, data: pts.map((b) => ({x: mid(b), y: num(b.max)})), borderColor: s.color,
                   backgroundColor: s.color + '33', pointRadius: 0, borderWidth: 1, fill: '+1'});
    datasets.push({label: `${s.label} min`, data: pts.map((b) => ({x: mid(b), y: num(b.min)})), borderColor: s.color,
                   pointRadius: 0, borderWidth: 1, fill: false});
    const marks = (s.data.culprits || []).filter((m) => Number.isFinite(num(m.value)));
    if (marks.length) {
      datasets.push({label: `${s.label} culprits`, type: 'scatter', data: marks.map((m) => ({x: num(m.position), y: num(m.value), name: m.api || m.name})),
                     pointStyle: 'triangle', pointRadius: 7, backgroundColor: '#cf222e', borderColor: '#cf222e'});
    }
  }
  const first = series[0].data;
  if (first.hasThreshold) {
    datasets.push({label: `threshold ${fmt(first.threshold)}`, data: [{x: 0, y: num(first.threshold)}, {x: Math.max(total - 1, 1), y: num(first.threshold)}],
                   borderColor: '#6e7781', borderDash: [6, 4], pointRadius: 0, borderWidth: 1, fill: false});
  }
  return new Chart(canvas, {
    type: 'line',
    data: {datasets},
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
      scales: {x: {type: 'linear', title: {display: true, text: 'dump order'}, min: 0},
               y: {title: {display: true, text: first.metric}}},
      plugins: {legend: {labels: {filter: (i) => !i.text.endsWith(' min')}},
                tooltip: {callbacks: {label: (c) => (c.raw.name ? `${c.raw.name}: ` : `${c.dataset.label}: `) + fmt(c.raw.y)}}},
    },
  });
}

const charts = [];
function clearCharts() { while (charts.length) charts.pop().destroy(); }

// "culprit" on a failing result of a culprit operator, "propagated" on one that fails because
// an input already failed.
function roleMark(r) {
  if (verdictName(r.verdict) !== 'FAIL') return null;
  if (r.culprit === 'CULPRIT_STATUS_CULPRIT') return el('strong', {class: 'v-FAIL'}, ' ← culprit');
  if (r.culprit === 'CULPRIT_STATUS_PROPAGATED') return el('span', {class: 'muted'}, ' (propagated)');
  return null;
}

function resultsTable(rows, metricNames, selected, onPick) {
  return el('table', {id: 'results'},
    el('thead', {}, el('tr', {}, el('th', {class: 'num'}, '#'), el('th', {}, 'Verdict'), el('th', {}, 'Name'),
                                  metricNames.map((m) => el('th', {class: 'num'}, m)), el('th', {}, 'Message'))),
    el('tbody', {}, rows.map((r) => {
      const ms = metricsOf(r);
      return el('tr', {class: 'clickable' + (r.key.name === selected ? ' selected' : ''), 'data-name': r.key.name,
                       onclick: () => onPick(r.key.name)},
        el('td', {class: 'num'}, r.key.index),
        verdictCell(r.verdict),
        el('td', {class: 'name'}, r.key.name, roleMark(r)),
        metricNames.map((m) => el('td', {class: 'num'}, ms[m] ? metricText(ms[m]) : '')),
        el('td', {class: 'muted'}, r.message || ''));
    })));
}

function statsRows(r) {
  const keys = ['max', 'min', 'mean', 'norm'];
  const g = r.goldenStats || {}, t = r.targetStats || {};
  return keys.filter((k) => k in g || k in t).map((k) => el('tr', {}, el('td', {}, k), el('td', {class: 'num'}, fmt(g[k])), el('td', {class: 'num'}, fmt(t[k]))));
}

function detailPanel(r, limits) {
  const thresholds = limits || {};
  return el('section', {class: 'detail', id: 'detail'},
    el('h2', {}, r.key.name),
    el('dl', {class: 'facts'},
      el('dt', {}, 'Verdict'), el('dd', {class: 'v-' + verdictName(r.verdict)}, `${verdictName(r.verdict)} (${r.peerVerdict || ''})`),
      el('dt', {}, 'Operator'), el('dd', {}, r.key.api),
      el('dt', {}, 'Golden'), el('dd', {}, r.goldenName || '(none)'),
      el('dt', {}, 'Policy'), el('dd', {}, policyName(r.policy)),
      el('dt', {}, 'Message'), el('dd', {}, r.message || '')),
    el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, ''), el('th', {class: 'num'}, 'golden'), el('th', {class: 'num'}, 'target'))),
      el('tbody', {},
        el('tr', {}, el('td', {}, 'dtype'), el('td', {class: 'num'}, r.goldenDtypeText || (r.goldenDtype || '').replace(/^DTYPE_/, '')),
           el('td', {class: 'num'}, r.targetDtypeText || (r.targetDtype || '').replace(/^DTYPE_/, ''))),
        el('tr', {}, el('td', {}, 'shape'), el('td', {class: 'num'}, r.goldenShapeText || `[${(r.goldenShape || []).join(', ')}]`),
           el('td', {class: 'num'}, r.targetShapeText || `[${(r.targetShape || []).join(', ')}]`)),
        statsRows(r))),
    el('h2', {}, 'Metrics'),
    el('table', {id: 'detail-metrics'}, el('thead', {}, el('tr', {}, el('th', {}, 'Metric'), el('th', {class: 'num'}, 'Value'), el('th', {class: 'num'}, 'Threshold'))),
      el('tbody', {}, (r.metrics || []).map((m) => el('tr', {}, el('td', {}, m.name), el('td', {class: 'num'}, metricText(m)),
                                                         el('td', {class: 'num muted'}, thresholds[m.name] || ''))))));
}

// The figures of a ranked culprit (JobSummary.rankedCulprits) as the CLI prints them.
function culpritFigures(c) {
  const phase = (c.phase || '').replace('STEP_PHASE_', '').toLowerCase();
  const parts = [];
  if (phase && phase !== 'unspecified') parts.push(phase);
  parts.push(c.growth === undefined ? 'growth unknown' : `growth ${fmt3(num(c.growth))}×`);
  if (c.outError !== undefined) parts.push(`error ${fmt3(num(c.outError))}`);
  return `(${parts.join(', ')})`;
}

function fmt3(v) { return Number.isFinite(v) ? Number(v.toPrecision(3)).toString() : String(v); }

// The noise floor line and the failing operators within it (a finished job's summary).
function noiseFloor(summary) {
  if (!summary) return null;
  const floor = summary.noiseGrowth === undefined ? 'unknown'
    : `growth ${fmt3(num(summary.noiseGrowth))}× over ${summary.noiseSamples || 0} passing operators`;
  const within = summary.withinNoise || [];
  return el('div', {id: 'noise-floor', class: 'muted'},
    el('div', {}, `Noise floor: ${floor}; culprits need growth ≥ ${fmt3(num(summary.growthThreshold))}×`),
    within.length ? el('div', {}, `Within the noise floor (fail, but amplify the error they receive no more than passing operators do): ${within.join(', ')}`) : null);
}

// PaDiff's picture of the target's module tree: each culprit marked, propagated and within-noise
// failures dimmed; at most 5,000 nodes.
function moduleTree(nodes) {
  if (!nodes || !nodes.length) return el('p', {class: 'muted', id: 'module-tree'}, 'No module tree: the target run carries no construct.json.');
  const names = new Set(nodes.map((n) => n.name));
  const children = new Map();
  const roots = [];
  nodes.forEach((n, i) => {
    if (!n.parent || !names.has(n.parent) || n.parent === n.name) roots.push(i);
    else (children.get(n.parent) || children.set(n.parent, []).get(n.parent)).push(i);
  });
  const lines = [];
  const seen = new Set();
  const stack = roots.slice().reverse().map((i) => [i, 0]);
  while (stack.length && lines.length < 5000) {
    const [i, depth] = stack.pop();
    if (seen.has(i)) continue;
    seen.add(i);
    const n = nodes[i];
    const culprit = n.status === 'CULPRIT_STATUS_CULPRIT';
    const gradCulprit = n.gradientStatus === 'CULPRIT_STATUS_CULPRIT';
    const dim = n.status === 'CULPRIT_STATUS_PROPAGATED' || (n.fails && !culprit);
    const line = el('div', {class: 'tree-node' + (dim ? ' muted' : '')},
      n.name,
      culprit ? el('strong', {class: 'v-FAIL'}, '  <--- *** HERE ***') : null,
      gradCulprit ? el('strong', {class: 'v-FAIL'}, '  <--- *** HERE *** (parameters_grad)') : null);
    line.style.paddingLeft = `${depth * 1.2}rem`;  // CSSOM: the page's CSP refuses style attributes
    lines.push(line);
    for (const k of (children.get(n.name) || []).slice().reverse()) stack.push([k, depth + 1]);
  }
  return el('div', {id: 'module-tree', class: 'tree'}, lines,
    nodes.length > lines.length ? el('div', {class: 'muted'}, `… ${nodes.length - lines.length} more nodes (parity summary --tree)`) : null);
}

// Culprits, each with the propagated failing operators after it (until the next culprit); with
// the finished job's summary, ranked by error growth with their figures and stacks.
function culpritChains(culprits, propagated, summary) {
  if (!culprits.length) return el('p', {class: 'muted', id: 'culprits'}, 'No culprit: no operator fails while its inputs pass and grows the error beyond the noise floor.');
  const byApi = [];
  for (const c of culprits) {
    if (!byApi.length || byApi[byApi.length - 1].api !== c.key.api) byApi.push({api: c.key.api, index: num(c.key.index), ops: []});
  }
  for (const p of propagated) {
    const idx = num(p.key.index);
    let owner = null;
    for (const c of byApi) if (c.index <= idx) owner = c;
    if (owner && !owner.ops.includes(p.key.api)) owner.ops.push(p.key.api);
  }
  const ranked = (summary && summary.rankedCulprits) || [];
  const rank = new Map(ranked.map((c, i) => [c.api, i]));
  byApi.sort((a, b) => (rank.has(a.api) ? rank.get(a.api) : 1e9) - (rank.has(b.api) ? rank.get(b.api) : 1e9));
  return el('div', {id: 'culprits'}, byApi.map((c) => el('div', {class: 'culprit'},
    el('div', {class: 'api'}, c.api, rank.has(c.api) ? el('span', {class: 'figures'}, ' ', culpritFigures(ranked[rank.get(c.api)])) : null),
    rank.has(c.api) && ranked[rank.get(c.api)].stack ? el('pre', {class: 'stack'}, ranked[rank.get(c.api)].stack) : null,
    c.ops.length ? el('div', {}, el('span', {class: 'muted'}, `${c.ops.length} operator(s) downstream fail because of it:`),
                        el('ol', {}, c.ops.slice(0, 20).map((o) => el('li', {}, o))),
                        c.ops.length > 20 ? el('span', {class: 'muted'}, `… and ${c.ops.length - 20} more`) : null)
                 : el('div', {class: 'muted'}, 'nothing downstream fails'))));
}

async function jobView(jobId) {
  const q = new URL(location.href).searchParams;
  const verdict = q.get('verdict') || '';
  const sort = q.get('sort') || '';
  const desc = q.get('desc') === '1';
  const page = Math.max(parseInt(q.get('page') || '0', 10) || 0, 0);
  const search = q.get('q') || '';
  const metric = q.get('metric') || '';
  const op = q.get('op') || '';
  const enc = encodeURIComponent(jobId);
  const [job, series, culprits, propagated, results, summary] = await Promise.all([
    api(`/api/v1/jobs/${enc}`),
    api(`/api/v1/jobs/${enc}/series`, {metric, buckets: 600}),
    api(`/api/v1/jobs/${enc}/results`, {culprits: 'CULPRIT', page_size: 100}),
    api(`/api/v1/jobs/${enc}/results`, {culprits: 'PROPAGATED', page_size: 1000}),
    api(`/api/v1/jobs/${enc}/results`, {verdicts: verdict, sort_metric: sort, descending: desc ? 'true' : '',
                                         op_glob: search ? (search.includes('*') ? search : `*${search}*`) : '',
                                         page_size: PAGE_SIZE, page_token: page ? String(page * PAGE_SIZE) : ''}),
    api(`/api/v1/jobs/${enc}/summary`, {module_tree: 'true', worst_per_metric: 1}).catch(() => null),
  ]);
  const detail = op ? await api(`/api/v1/jobs/${enc}/results/${encodeURIComponent(op)}`).catch((e) => e) : null;
  crumbs(['Projects', '/'], [job.project, '/projects/' + encodeURIComponent(job.project)], job.jobId);
  const counts = job.counts || {};
  const rows = results.results || [];
  const metricNames = [];
  for (const r of rows) for (const m of r.metrics || []) if (!metricNames.includes(m.name) && metricNames.length < 4) metricNames.push(m.name);
  const limits = {};
  if (series.hasThreshold) limits[series.metric] = (series.higherIsBetter ? '≥ ' : '≤ ') + fmt(series.threshold);
  const running = stateName(job.state) === 'RUNNING';
  const pages = Math.max(Math.ceil(num(results.total) / PAGE_SIZE), 1);
  const canvas = el('canvas', {id: 'plot', role: 'img', 'aria-label': `${series.metric} along dump order`});
  main.replaceChildren(
    el('h1', {}, 'Job ', job.jobId, running ? el('span', {class: 'live', id: 'live'}, ' ● live') : null),
    el('dl', {class: 'facts'},
      el('dt', {}, 'State'), el('dd', {id: 'state'}, stateName(job.state), job.error ? ` — ${job.error}` : ''),
      el('dt', {}, 'Golden'), el('dd', {}, job.goldenRunName || job.goldenRunId),
      el('dt', {}, 'Target'), el('dd', {}, job.targetRunName || job.targetRunId),
      el('dt', {}, 'Policy'), el('dd', {}, jobPolicy(job, rows)),
      el('dt', {}, 'Progress'), el('dd', {}, `${job.pairsDone} / ${job.pairsTotal || '?'} pairs`,
        el('div', {class: 'progress'}, (() => { const d = el('div'); d.style.width = `${num(job.pairsTotal) ? 100 * num(job.pairsDone) / num(job.pairsTotal) : 0}%`; return d; })()))),
    el('div', {class: 'counts', id: 'counts'},
      el('button', {class: verdict ? '' : 'active', onclick: () => navigate(withQuery({verdict: null, page: null}))}, `All ${VERDICTS.reduce((s, v) => s + num(counts[v.toLowerCase()] || 0), 0)}`),
      VERDICTS.map((v) => el('button', {class: 'v-' + v + (verdict === v ? ' active' : ''), 'data-verdict': v,
                                        onclick: () => navigate(withQuery({verdict: v, page: null}))}, `${v} ${counts[v.toLowerCase()] || 0}`))),
    el('h2', {}, 'Culprits'), culpritChains(culprits.results || [], propagated.results || [], summary),
    noiseFloor(summary),
    summary && (summary.moduleTree || []).length ? el('details', {id: 'tree-box'}, el('summary', {}, 'Module tree'), moduleTree(summary.moduleTree)) : null,
    el('h2', {}, `${series.metric} along dump order`),
    el('div', {class: 'toolbar'}, el('label', {for: 'metric'}, 'Metric '),
      el('select', {id: 'metric', onchange: (e) => navigate(withQuery({metric: e.target.value}))},
        [...new Set([series.metric, 'Cosine', 'MaxAbsErr', 'MaxRelativeErr', 'EucDist', 'PCC', 'Dissimilarity', 'Greatest absolute difference'])]
          .map((m) => el('option', {value: m, selected: m === series.metric}, m))),
      el('span', {class: 'muted'}, `${series.total} results in ${(series.buckets || []).length} buckets (min and max of each)`)),
    el('div', {class: 'plot-box'}, canvas),
    el('h2', {}, 'Results'),
    el('div', {class: 'toolbar'},
      el('form', {id: 'search-form', onsubmit: (e) => { e.preventDefault(); navigate(withQuery({q: e.target.elements.q.value, page: null})); }},
        el('input', {name: 'q', id: 'search', value: search, placeholder: 'name or operator (glob)'}), el('button', {type: 'submit'}, 'Search')),
      el('label', {for: 'sort'}, 'Sort by'),
      el('select', {id: 'sort', onchange: (e) => navigate(withQuery({sort: e.target.value, page: null}))},
        el('option', {value: ''}, 'dump order'), metricNames.map((m) => el('option', {value: m, selected: m === sort}, m))),
      el('label', {}, el('input', {type: 'checkbox', id: 'desc', checked: desc, onchange: (e) => navigate(withQuery({desc: e.target.checked ? '1' : null, page: null}))}), ' descending')),
    el('div', {class: 'split'},
      el('div', {class: 'table-box'},
        resultsTable(rows, metricNames, op, (name) => navigate(withQuery({op: name}))),
        el('div', {class: 'pager'},
          el('button', {disabled: page === 0, onclick: () => navigate(withQuery({page: page - 1 || null}))}, '‹ Previous'),
          el('span', {id: 'page-info'}, `page ${page + 1} of ${pages} (${results.total} results)`),
          el('button', {disabled: page + 1 >= pages, onclick: () => navigate(withQuery({page: page + 1}))}, 'Next ›'))),
      detail ? (detail instanceof Error ? errorBox(detail) : detailPanel(detail, limits)) : el('p', {class: 'muted detail'}, 'Pick a row to see the operator.')));
  clearCharts();
  charts.push(plot(canvas, [{label: job.jobId, data: series, color: '#0969da'}]));
  if (running) follow(jobId);
}

// A running job's page: reads its event stream (fetch, so that the token header goes along) and
// redraws at most once a second while verdicts arrive, and once more when it ends.
function follow(jobId) {
  if (live && live.jobId === jobId) return;
  stopLive();
  const abort = new AbortController();
  live = {jobId, abort, timer: null};
  const headers = token() ? {Authorization: 'Bearer ' + token()} : {};
  const redraw = () => {
    if (!live || live.timer) return;
    live.timer = setTimeout(() => { if (live) live.timer = null; render(true); }, 1000);
  };
  fetch(`/api/v1/jobs/${encodeURIComponent(jobId)}/events`, {headers, signal: abort.signal}).then(async (res) => {
    if (!res.ok || !res.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '', last = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (event.startsWith('event: end')) { live = null; render(true); return; }
        const data = event.split('\n').find((l) => l.startsWith('data: '));
        if (data && data !== last) { last = data; redraw(); }
      }
    }
  }).catch(() => {});
}

function changesTable(id, rows, none) {
  if (!rows.length) return el('p', {class: 'muted', id}, none);
  return el('table', {id},
    el('thead', {}, el('tr', {}, ['Name', 'Base', 'Current', 'Change'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {},
      el('td', {class: 'name'}, r.name), verdictCell(r.base && r.base.verdict), verdictCell(r.current && r.current.verdict),
      el('td', {}, r.reason)))));
}

async function diffView(base, current) {
  const q = new URL(location.href).searchParams;
  const page = Math.max(parseInt(q.get('page') || '0', 10) || 0, 0);
  const metric = q.get('metric') || '';
  const diffPath = `/api/v1/jobs/${encodeURIComponent(base)}/diff/${encodeURIComponent(current)}`;
  const [a, b, diff, fixes, sa, sb] = await Promise.all([
    api(`/api/v1/jobs/${encodeURIComponent(base)}`), api(`/api/v1/jobs/${encodeURIComponent(current)}`),
    api(diffPath, {page_size: PAGE_SIZE, page_token: page ? String(page * PAGE_SIZE) : ''}),
    api(diffPath, {improvements: 'true', page_size: PAGE_SIZE, page_token: page ? String(page * PAGE_SIZE) : ''}),
    api(`/api/v1/jobs/${encodeURIComponent(base)}/series`, {metric, buckets: 600}),
    api(`/api/v1/jobs/${encodeURIComponent(current)}/series`, {metric, buckets: 600}),
  ]);
  crumbs(['Projects', '/'], [b.project, '/projects/' + encodeURIComponent(b.project)], `${base} → ${current}`);
  const canvas = el('canvas', {id: 'plot', role: 'img', 'aria-label': 'both jobs along dump order'});
  main.replaceChildren(
    el('h1', {}, 'Job vs job'),
    el('dl', {class: 'facts'},
      el('dt', {}, 'Base'), el('dd', {}, link('/jobs/' + encodeURIComponent(base), base), ` (${a.targetRunName || a.targetRunId})`),
      el('dt', {}, 'Current'), el('dd', {}, link('/jobs/' + encodeURIComponent(current), current), ` (${b.targetRunName || b.targetRunId})`)),
    el('h2', {}, `${sa.metric} along dump order`),
    el('div', {class: 'plot-box'}, canvas),
    el('h2', {}, 'Regressions'), changesTable('regressions', diff.regressions || [], 'No operator got worse beyond the threshold.'),
    el('h2', {}, 'Fixes'), changesTable('fixes', fixes.regressions || [], 'No operator got better beyond the threshold.'),
    el('div', {class: 'pager'},
      el('button', {disabled: page === 0, onclick: () => navigate(withQuery({page: page - 1 || null}))}, '‹ Previous'),
      el('button', {disabled: !diff.nextPageToken && !fixes.nextPageToken, onclick: () => navigate(withQuery({page: page + 1}))}, 'Next ›')));
  clearCharts();
  charts.push(plot(canvas, [{label: 'base ' + base, data: sa, color: '#6e7781'}, {label: 'current ' + current, data: sb, color: '#0969da'}]));
}

// ---- routing ---------------------------------------------------------------------------------

async function render(keepLive) {
  if (!keepLive) stopLive();
  document.body.dataset.ready = '0';
  const parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === 'jobs' && parts[2] === 'diff' && parts.length === 4) await diffView(parts[1], parts[3]);
    else if (parts[0] === 'jobs' && parts.length === 2) await jobView(parts[1]);
    else if (parts[0] === 'projects' && parts.length === 2) await projectView(parts[1]);
    else await homeView();
    document.body.dataset.ready = '1';
  } catch (e) {
    clearCharts();
    main.replaceChildren(errorBox(e), e instanceof ApiError && e.status === 401
      ? el('p', {}, 'This parityd requires a token: paste one above (parity token create --role viewer).') : null);
    document.body.dataset.ready = '1';
  }
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a[data-nav]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', () => render());
document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = document.getElementById('token').value.trim();
  if (t) sessionStorage.setItem('parity-token', t); else sessionStorage.removeItem('parity-token');
  document.getElementById('token').value = '';
  render();
});
render();
