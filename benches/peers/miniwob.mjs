// Peer side of the MiniWoB++ side-by-side benchmark, driven by
// `cargo bench -p cordon-agent-bench --bench miniwob`, which writes CONFIG (the pages'
// folder, the tasks with their start page, viewport and reset hook, the seeds, and the
// scripted policy's planners) and runs this with the same Debian chromium.
//
// A plain Playwright loop, one episode per (task, seed), JOBS at once, each on a fresh
// browser context: load the page, seed and start it with the same reset hook Cordon runs,
// take a screenshot, then ask the planner for the next action, do it with page.mouse /
// page.keyboard, take a PNG screenshot (the observation a computer-use step returns) and
// read the page's WOB_DONE_GLOBAL / WOB_RAW_REWARD_GLOBAL, until the page says done.
// Prints one JSON line: {"peer", "jobs", "episodes", "succeeded", "seconds", "per_minute"}.
//
// Usage: node miniwob.mjs CONFIG JOBS   (env CORDON_CHROMIUM overrides the binary)

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

async function episode({ task, seed }) {
  const [w, h] = task.viewport.split('x').map(Number);
  const context = await browser.newContext({ viewport: { width: w, height: h } });
  try {
    const page = await context.newPage();
    await page.goto(`${origin}/${task.path}?seed=${seed}`);
    await page.evaluate(`((seed) => { ${task.reset}\n})(${seed})`);
    await page.screenshot({ type: 'png' });
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
    await context.close();
  }
}

await Promise.all(Array.from({ length: jobs }, async () => {
  while (queue.length) await episode(queue.shift());
}));
const seconds = (performance.now() - t0) / 1000;
await browser.close();
server.close();
console.log(JSON.stringify({ peer: 'playwright', jobs, episodes: total, succeeded,
  seconds: Math.round(seconds * 100) / 100, per_minute: Math.round(total / seconds * 600) / 10 }));
