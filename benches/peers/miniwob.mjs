// Peer side of the MiniWoB++ side-by-side benchmark, driven by
// `cargo bench -p cordon-agent-bench --bench miniwob`, which writes CONFIG (the pages'
// folder, the tasks with their start page, viewport and reset hook, the seeds, and the
// scripted policy's planners) and runs this with the same Debian chromium.
//
// A plain Playwright loop, one episode per (task, seed), JOBS at once. MODE says how an
// episode starts:
// - `browsergym` (default): as BrowserGym's MiniWoB++ reset does, on a fresh browser
//   context: `page.goto` the task's page, then seed and start it with the same reset hook
//   Cordon runs;
// - `in-page`: as MiniWoB++'s own Python instance does, each worker keeps one context and
//   page; an episode of the task its page shows starts there without a load, with the
//   same in-place hook Cordon runs (`core.endEpisode(0)`, the display's figures put back,
//   `Math.seedrandom(seed)`, `core.startEpisodeReal()`); another task's page is loaded
//   (`goto` + the reset hook). Each worker takes consecutive episodes of the list (the
//   seeds of one task), then the last ones of the worker with the most left, like Cordon's
//   run.
// Then a screenshot, and per step: the planner's next action, done with page.mouse /
// page.keyboard, a PNG screenshot (the observation a computer-use step returns) and a read
// of the page's WOB_DONE_GLOBAL / WOB_RAW_REWARD_GLOBAL, until the page says done.
// Prints one JSON line: {"peer", "jobs", "episodes", "succeeded", "seconds", "per_minute",
// "reset_ms_p50", "in_page"}.
//
// Usage: node miniwob.mjs CONFIG JOBS [browsergym|in-page]
// (env PEER_CHROMIUM or CORDON_CHROMIUM overrides the binary)

import { chromium } from 'playwright-core';
import { readFileSync, createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { join, normalize, extname } from 'node:path';

const [configPath, jobsArg] = process.argv.slice(2);
if (!configPath) {
  console.error('usage: node miniwob.mjs CONFIG JOBS');
  process.exit(2);
}
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const jobs = Number(jobsArg || 1);
const mode = process.argv[4] || 'browsergym';
if (!['browsergym', 'in-page'].includes(mode)) {
  console.error(`unknown mode ${mode}: browsergym or in-page`);
  process.exit(2);
}
// PEER_CHROMIUM runs the peer on another binary than Cordon's CORDON_CHROMIUM.
const executablePath = process.env.PEER_CHROMIUM || process.env.CORDON_CHROMIUM || '/usr/lib/chromium/chromium';
const root = process.getuid && process.getuid() === 0;
// The same flags Cordon launches with, so the browsers are comparable.
const args = ['--disable-gpu', '--disable-smooth-scrolling', '--no-default-browser-check', '--disable-extensions'];
if (root) args.push('--no-sandbox');

const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.jpg': 'image/jpeg', '.gif': 'image/gif' };
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(req.url.split('?')[0])).replace(/^(\.\.[/\\])+/, '');
  const file = join(config.html, path);
  try {
    if (!file.startsWith(config.html) || !statSync(file).isFile()) throw new Error('not found');
    res.writeHead(200, { 'content-type': types[extname(file)] || 'application/octet-stream',
      'cache-control': 'no-store' });
    createReadStream(file).pipe(res);
  } catch {
    res.writeHead(404); res.end('not found');
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;

const t0 = performance.now();
const browser = await chromium.launch({ executablePath, args, headless: true });
const queue = [];
for (const task of config.tasks) for (const seed of config.seeds) queue.push({ task, seed });
const total = queue.length;
let succeeded = 0;
let inPage = 0;
const resets = [];

// Each worker's share: consecutive episodes of the list; one whose share is done takes the
// last episode of the share with the most left.
const shares = Array.from({ length: jobs }, (_, w) =>
  queue.slice(Math.floor((w * total) / jobs), Math.floor(((w + 1) * total) / jobs)));
function next(worker) {
  if (shares[worker].length) return shares[worker].shift();
  const most = shares.reduce((a, b) => (b.length > a.length ? b : a));
  return most.pop();
}

const hook = (script, seed) => `((seed) => { ${script}\n})(${seed})`;

// BrowserGym's way: a new context and a load per episode.
async function freshStart({ task, seed }) {
  const [w, h] = task.viewport.split('x').map(Number);
  const context = await browser.newContext({ viewport: { width: w, height: h } });
  const page = await context.newPage();
  await page.goto(`${origin}/${task.path}?seed=${seed}`);
  await page.evaluate(hook(task.reset, seed));
  return { page, done: () => context.close() };
}

// MiniWoB++'s way: the worker's page, reset in place when it shows the task.
async function inPageStart(slot, { task, seed }) {
  if (!slot.page) {
    const [w, h] = task.viewport.split('x').map(Number);
    slot.context = await browser.newContext({ viewport: { width: w, height: h } });
    slot.page = await slot.context.newPage();
  }
  if (slot.task === task.id && task.reset_in_place) {
    await slot.page.evaluate(hook(task.reset_in_place, seed));
    inPage += 1;
  } else {
    await slot.page.goto(`${origin}/${task.path}?seed=${seed}`);
    await slot.page.evaluate(hook(task.reset, seed));
    slot.task = task.id;
  }
  return { page: slot.page, done: async () => {} };
}

async function episode(slot, { task, seed }) {
  const t0 = performance.now();
  const { page, done: end } = mode === 'in-page'
    ? await inPageStart(slot, { task, seed })
    : await freshStart({ task, seed });
  try {
    await page.screenshot({ type: 'png' });
    resets.push(performance.now() - t0);
    const planner = config.planners[task.id];
    for (let step = 0; step < task.max_steps; step++) {
      const plan = await page.evaluate(planner);
      if (plan === null || plan.stuck) break;
      if (plan.click) await page.mouse.click(plan.click[0], plan.click[1]);
      else if (plan.type !== undefined) await page.keyboard.type(plan.type);
      else if (plan.key === 'ctrl+a') await page.keyboard.press('Control+A');
      await page.screenshot({ type: 'png' });
      const [done] = await page.evaluate('[WOB_DONE_GLOBAL]');
      if (done) break;
    }
    const [done, raw] = await page.evaluate('[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL]');
    if (done && raw >= 1) succeeded += 1;
  } finally {
    await end();
  }
}

await Promise.all(Array.from({ length: jobs }, async (_, worker) => {
  const slot = {};
  for (let item = next(worker); item; item = next(worker)) await episode(slot, item);
  if (slot.context) await slot.context.close();
}));
const seconds = (performance.now() - t0) / 1000;
await browser.close();
server.close();
resets.sort((a, b) => a - b);
console.log(JSON.stringify({ peer: `playwright-${mode}`, jobs, episodes: total, succeeded,
  seconds: Math.round(seconds * 100) / 100, per_minute: Math.round(total / seconds * 600) / 10,
  reset_ms_p50: Math.round(resets[Math.floor(resets.length / 2)] * 10) / 10, in_page: inPage }));
