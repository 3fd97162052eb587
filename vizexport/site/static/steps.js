// vizexport step viewer: every step of every rewrite of one context, laid out here with Graphviz (WebAssembly).
// The context's pack (packs.py) holds its nodes and steps; this file rebuilds each step's graph, writes the same DOT
// as vizexport's own SVG export (graphs/dot.py: the drawer is ported line by line, and tested to match it byte for
// byte), and lays it out in a worker. ←/→ move through steps, ↑/↓ through rewrites; the wheel (or a pinch) zooms
// around the pointer, a drag pans, F fits and 1 shows the graph at its own size. Works from file://.
"use strict";

const config = JSON.parse(document.getElementById("viewer-config").textContent);
const $ = (id) => document.getElementById(id);

const gunzip = (b64) => {
  const gz = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new Response(new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip")));
};
const gunzipText = (b64) => gunzip(b64).text();

// A pack (packs.py): a JSON header's length and text, then integer columns, each value's bytes in planes.
const COLUMN_TYPES = { int8: Int8Array, int16: Int16Array, int32: Int32Array };
const unplane = (planes, Type, count) => {  // the bytes of value i are planes[i], planes[count + i], …
  const out = new Type(count), bytes = new Uint8Array(out.buffer), width = Type.BYTES_PER_ELEMENT;
  for (let b = 0; b < width; b++) {
    const plane = planes.subarray(b * count, (b + 1) * count);
    for (let i = 0, j = b; i < count; i++, j += width) bytes[j] = plane[i];  // little-endian, as every browser
  }
  return out;
};
const readPack = async (b64) => {
  const buf = await gunzip(b64).arrayBuffer();
  const size = new DataView(buf).getUint32(0, true);
  const pack = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, size)));
  let at = 4 + size;
  for (const [name, type, count] of pack.columns) {
    at += -at & 3;  // each column starts at a multiple of 4 bytes
    const Type = COLUMN_TYPES[type];
    pack[name] = unplane(new Uint8Array(buf, at, count * Type.BYTES_PER_ELEMENT), Type, count);
    at += count * Type.BYTES_PER_ELEMENT;
  }
  return pack;
};

// The rewrites and their steps: each step's numbers are the running sums of the step columns (packs.py).
const readSteps = (pack) => {
  const sums = {}, errors = new Map(pack.errors);
  for (const name of ["sink", "before", "after", "loc"]) {
    const d = pack[name], out = (sums[name] = new Int32Array(d.length));
    for (let i = 0, v = 0; i < d.length; i++) out[i] = v += d[i];
  }
  let at = 0;
  return pack.rewrites.map(([name, depth, count], index) => {
    const steps = [];
    for (let i = 0; i < count; i++, at++) {
      steps.push({ i, sink: sums.sink[at], before: sums.before[at], after: sums.after[at], loc: sums.loc[at],
                   seconds: pack.seconds[at], error: errors.get(at) ?? null });
    }
    return { index, name, depth, steps };
  });
};

// A Map that forgets its least recently used entries beyond `limit` (graphs and layouts of steps seen long ago).
class Lru extends Map {
  constructor(limit) { super(); this.limit = limit; }
  get(k) { const v = super.get(k); if (v !== undefined) { super.delete(k); super.set(k, v); } return v; }
  set(k, v) { super.delete(k); super.set(k, v); if (this.size > this.limit) this.delete(this.keys().next().value); return this; }
}

// ---- the nodes of one replay session ----
class Nodes {
  constructor(pack) {
    const n = pack.look.length;
    this.looks = pack.looks;
    this.lookOf = new Int32Array(n);
    this.src = new Array(n);
    const d = pack.src;  // every node's sources in turn, as distances back
    let at = 0, own = 0;
    for (let i = 0; i < n; i++) {
      const back = pack.origin[i];
      if (back) {  // a copy of an earlier node, as many sources, some changed (0: the origin's)
        const o = i - back, s = this.src[o].slice();
        for (let k = 0; k < s.length; k++, at++) if (d[at]) s[k] = i - d[at];
        this.lookOf[i] = this.lookOf[o];
        this.src[i] = s;
      } else {
        const s = new Array(pack.nsrc[own++]);
        for (let k = 0; k < s.length; k++, at++) s[k] = i - d[at];
        this.lookOf[i] = pack.look[i];
        this.src[i] = s;
      }
    }
    this.foldMemo = new Map();
  }
  look(n) { return this.looks[this.lookOf[n]]; }
  label(n) { return this.look(n)[0]; }
  fill(n) { return this.look(n)[1]; }
  op(n) { return this.look(n)[3]; }
  text(n) { return this.look(n)[5]; }
  foldable(n) {
    let hit = this.foldMemo.get(n);
    if (hit === undefined) {
      const rule = this.look(n)[2];
      hit = rule === 1 || (rule === 2 && this.src[n].length > 0 && this.foldable(this.src[n][0]));
      this.foldMemo.set(n, hit);
    }
    return hit;
  }
  folded(n) {  // a broadcast shows the constant it broadcasts
    while (this.look(n)[2] === 2 && this.src[n].length) n = this.src[n][0];
    return [this.op(n), this.look(n)[4]];
  }
  toposort(root) {  // sources before users, first source first (walks.post_order)
    const out = [], finished = new Set(), stack = [[root, false]];
    while (stack.length) {
      const [n, expanded] = stack.pop();
      if (expanded) { finished.add(n); out.push(n); continue; }
      if (finished.has(n)) continue;
      stack.push([n, true]);
      const s = this.src[n];
      for (let i = s.length - 1; i >= 0; i--) if (!finished.has(s[i])) stack.push([s[i], false]);
    }
    return out;
  }
}

// ---- one step: its graph and what is new in it (tinygrad.replay _Run.apply / _created) ----
const graphOf = (nodes, step, cache) => {
  if (step.sink < 0) return null;
  let g = cache.get(step.sink);
  if (!g) { const order = nodes.toposort(step.sink); g = { order, set: new Set(order) }; cache.set(step.sink, g); }
  return g;
};

const newNodes = (nodes, step, prev, g) => {
  const created = new Set(), rebuilt = new Set();
  if (!prev || !g) return { created, rebuilt };
  const fresh = new Set(g.order.filter((n) => !prev.set.has(n)));
  if (fresh.size && step.after >= 0) {
    const seen = new Set([step.after]), stack = [step.after];
    while (stack.length) {
      const x = stack.pop();
      if (fresh.has(x)) created.add(x);
      else if (g.set.has(x)) continue;  // an old node: nothing new below it
      for (const s of nodes.src[x]) if (!seen.has(s)) { seen.add(s); stack.push(s); }
    }
  }
  for (const n of fresh) if (!created.has(n)) rebuilt.add(n);
  return { created, rebuilt };
};

// ---- DOT, as graphs/dot.py Drawer writes it ----
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/g;
const quote = (s) => '"' + s.replace(CONTROL, "?").replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
const isDark = (fill) => {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(fill.slice(i, i + 2), 16) / 255);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < config.darkBelow;
};

class Drawer {
  constructor(nodes) { this.nodes = nodes; this.plain = new Map(); this.ports = new Map(); }

  folds(n, root, keep, fresh) {
    if (n === root || !this.nodes.foldable(n)) return false;
    if (!keep.size || !fresh.has(n)) return true;
    return !this.nodes.toposort(n).some((x) => keep.has(x));
  }

  visible(root, keep, fresh) {
    const order = this.nodes.toposort(root), shown = new Set([root]), drawn = [];
    for (let i = order.length - 1; i >= 0; i--) {
      const n = order[i];
      if (!shown.has(n) || this.folds(n, root, keep, fresh)) continue;
      for (const s of this.nodes.src[n]) shown.add(s);
      drawn.push(n);
    }
    return drawn.reverse();
  }

  draw(step, created, rebuilt, hint) {
    const root = step.sink, fresh = new Set([...created, ...rebuilt]);
    let order = this.visible(root, created, fresh);
    const total = order.length, capped = total > config.maxNodes;
    let hidden = new Map();
    if (capped) [order, hidden] = this.neighbourhood(order, this.focus(step, order, created, rebuilt, hint));
    const ids = new Map(order.map((n, i) => [n, `n${i}`]));
    const out = [config.header];
    if (capped) {
      const note = `showing ${order.length.toLocaleString("en")} of ${total.toLocaleString("en")} nodes around the ` +
        `change (graph above --max-nodes ${config.maxNodes})`;
      out.push(`label=${quote(note)}; labelloc=t; fontcolor="#c92a2a";\n`);
    }
    for (const n of order) out.push(this.node(n, ids.get(n), root, created, rebuilt, hidden.get(n) || 0, fresh));
    for (const n of order) {
      const lit = fresh.has(n);
      for (const [s, plain, litAttrs] of this.inEdges(n)) {
        if (ids.has(s)) out.push(`${ids.get(s)} -> ${ids.get(n)}${lit && fresh.has(s) ? litAttrs : plain}`);
      }
    }
    out.push(this.ghost(step, ids));
    out.push("}\n");
    return { text: out.join(""), nodes: order.length, total, capped, ids };
  }

  node(n, nid, root, created, rebuilt, hidden, fresh) {
    if (!hidden && n !== root && !fresh.has(n)) {
      let body = this.plain.get(n);
      if (body === undefined) { body = this.body(n, root, created, 0, fresh); this.plain.set(n, body); }
      return `${nid} [id="${nid}", ${body}];\n`;
    }
    const attrs = [`id=${quote(nid)}`, this.body(n, root, created, hidden, fresh)];
    if (created.has(n)) attrs.push('class="created"', `color="${config.highlight}"`, "penwidth=3");
    else if (rebuilt.has(n)) attrs.push('class="rebuilt"', `color="${config.highlight}"`, 'style="filled,dashed"', "penwidth=1.5");
    else if (hidden) attrs.push('style="filled,dotted"');
    if (n === root) attrs.push("peripheries=2");
    return `${nid} [${attrs.join(", ")}];\n`;
  }

  body(n, root, keep, hidden, fresh) {
    const nodes = this.nodes;
    let label = nodes.label(n);
    const folded = [];
    nodes.src[n].forEach((s, i) => {
      if (this.folds(s, root, keep, fresh)) { const [op, text] = nodes.folded(s); folded.push(`${op}${i} ${text}`); }
    });
    if (folded.length) label += "\n" + folded.join("\n");
    if (hidden) label += `\n(+${hidden} not shown)`;
    const fill = nodes.fill(n);
    if (isDark(fill)) return `label=${quote(label)}, fillcolor="${fill}", fontcolor="white"`;
    return `label=${quote(label)}, fillcolor="${fill}"`;
  }

  inEdges(n) {
    let hit = this.ports.get(n);
    if (!hit) {
      const src = this.nodes.src[n], ports = new Map();
      src.forEach((s, i) => { if (!ports.has(s)) ports.set(s, []); ports.get(s).push(String(i)); });
      hit = [];
      for (const [s, idx] of ports) {
        const label = src.length > 1 ? `headlabel="${idx.join(",")}"` : "";
        const lit = label ? `${label}, color="${config.highlight}"` : `color="${config.highlight}"`;
        hit.push([s, label ? ` [${label}];\n` : ";\n", ` [${lit}];\n`]);
      }
      this.ports.set(n, hit);
    }
    return hit;
  }

  ghost(step, ids) {
    const [u0, u1] = [step.before, step.after];
    if (u0 < 0 || u1 < 0 || ids.has(u0) || !ids.has(u1)) return "";
    const label = "replaced:\n" + this.nodes.op(u0);
    return `replaced [id="replaced", class="replaced", label=${quote(label)}, style="dashed", ` +
      `color="#909090", fontcolor="#606060", fillcolor="white"];\n` +
      `replaced -> ${ids.get(u1)} [style=dashed, color="#909090", taillabel="replaced by"];\n`;
  }

  focus(step, order, created, rebuilt, hint) {
    const inside = new Set(order);
    let focus = order.filter((n) => created.has(n) || rebuilt.has(n));
    for (const extra of [step.after, hint, step.sink]) {
      if (focus.length) break;
      if (extra !== undefined && extra >= 0 && inside.has(extra)) focus = [extra];
    }
    return focus;
  }

  neighbourhood(order, focus) {
    const src = this.nodes.src, inside = new Set(order), users = new Map(order.map((n) => [n, []]));
    for (const n of order) for (const s of new Set(src[n])) if (inside.has(s)) users.get(s).push(n);
    const keep = new Set(focus.slice(0, config.maxNodes)), queue = [...keep].map((n) => [n, true]);
    for (let q = 0; q < queue.length && keep.size < config.maxNodes; q++) {
      const [n, up] = queue[q];
      const next = [...new Set(src[n])].map((m) => [m, false]).concat(up ? users.get(n).map((m) => [m, true]) : []);
      for (const [m, mUp] of next) {
        if (inside.has(m) && !keep.has(m)) {
          keep.add(m);
          queue.push([m, mUp]);
          if (keep.size >= config.maxNodes) break;
        }
      }
    }
    const hidden = new Map();
    for (const n of keep) {
      const k = [...new Set(src[n]), ...users.get(n)].filter((m) => inside.has(m) && !keep.has(m)).length;
      if (k) hidden.set(n, k);
    }
    return [order.filter((n) => keep.has(n)), hidden];
  }
}

// ---- the text diff of a match (graphs/diff.py) ----
const pretty = (nodes, root, maxLines = 80) => {
  const lines = [], printed = new Map(), stack = [[root, 0, ""]];
  while (stack.length) {
    const [n, depth, port] = stack.pop();
    const pad = "  ".repeat(depth) + port;
    if (printed.has(n)) { lines.push(`${pad}^${printed.get(n)}`); continue; }
    if (lines.length >= maxLines) { lines.push(`${pad}… (more not shown)`); break; }
    printed.set(n, lines.length);
    lines.push(pad + nodes.text(n));
    const s = nodes.src[n];
    for (let i = s.length - 1; i >= 0; i--) stack.push([s[i], depth + 1, s.length > 1 ? `${i}: ` : ""]);
  }
  return lines;
};

// difflib's SequenceMatcher and unified_diff, as graphs/diff.py prints with them. No junk: pretty() prints at most
// 81 lines, below the 200 where difflib's autojunk starts.
const matchingBlocks = (a, b) => {
  const b2j = new Map();
  b.forEach((x, j) => { if (!b2j.has(x)) b2j.set(x, []); b2j.get(x).push(j); });
  const longest = (alo, ahi, blo, bhi) => {  // the longest common run: earliest in a, then in b
    let best = [alo, blo, 0], j2len = new Map();
    for (let i = alo; i < ahi; i++) {
      const next = new Map();
      for (const j of b2j.get(a[i]) || []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) || 0) + 1;
        next.set(j, k);
        if (k > best[2]) best = [i - k + 1, j - k + 1, k];
      }
      j2len = next;
    }
    return best;
  };
  const queue = [[0, a.length, 0, b.length]], blocks = [];
  while (queue.length) {
    const [alo, ahi, blo, bhi] = queue.pop(), [i, j, k] = longest(alo, ahi, blo, bhi);
    if (!k) continue;
    blocks.push([i, j, k]);
    if (alo < i && blo < j) queue.push([alo, i, blo, j]);
    if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
  }
  blocks.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const out = [];
  let cur = [0, 0, 0];
  for (const blk of blocks) {  // adjacent runs merged
    if (cur[0] + cur[2] === blk[0] && cur[1] + cur[2] === blk[1]) cur[2] += blk[2];
    else { if (cur[2]) out.push(cur); cur = blk.slice(); }
  }
  if (cur[2]) out.push(cur);
  out.push([a.length, b.length, 0]);
  return out;
};

const opcodes = (a, b) => {
  const out = [];
  let i = 0, j = 0;
  for (const [ai, bj, size] of matchingBlocks(a, b)) {
    const tag = i < ai && j < bj ? "replace" : i < ai ? "delete" : j < bj ? "insert" : "";
    if (tag) out.push([tag, i, ai, j, bj]);
    [i, j] = [ai + size, bj + size];
    if (size) out.push(["equal", ai, i, bj, j]);
  }
  return out;
};

const groupedOpcodes = (a, b, n) => {
  const codes = opcodes(a, b), groups = [];
  if (!codes.length) codes.push(["equal", 0, 1, 0, 1]);
  if (codes[0][0] === "equal") { const [t, i1, i2, j1, j2] = codes[0]; codes[0] = [t, Math.max(i1, i2 - n), i2, Math.max(j1, j2 - n), j2]; }
  const last = codes.length - 1;
  if (codes[last][0] === "equal") { const [t, i1, i2, j1, j2] = codes[last]; codes[last] = [t, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]; }
  let group = [];
  for (let [t, i1, i2, j1, j2] of codes) {
    if (t === "equal" && i2 - i1 > 2 * n) {
      group.push([t, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
      groups.push(group);
      group = [];
      [i1, j1] = [Math.max(i1, i2 - n), Math.max(j1, j2 - n)];
    }
    group.push([t, i1, i2, j1, j2]);
  }
  if (group.length && !(group.length === 1 && group[0][0] === "equal")) groups.push(group);
  return groups;
};

const unifiedRange = (start, stop) => {
  const length = stop - start;
  if (length === 1) return `${start + 1}`;
  return `${length ? start + 1 : start},${length}`;
};

const unifiedDiff = (a, b, n = 3) => {
  const out = [];
  for (const group of groupedOpcodes(a, b, n)) {
    if (!out.length) out.push("--- before", "+++ after");
    const first = group[0], last = group[group.length - 1];
    out.push(`@@ -${unifiedRange(first[1], last[2])} +${unifiedRange(first[3], last[4])} @@`);
    for (const [t, i1, i2, j1, j2] of group) {
      if (t === "equal") { for (const line of a.slice(i1, i2)) out.push(" " + line); continue; }
      if (t !== "insert") for (const line of a.slice(i1, i2)) out.push("-" + line);
      if (t !== "delete") for (const line of b.slice(j1, j2)) out.push("+" + line);
    }
  }
  return out;
};

// ---- layout: Graphviz in a worker built from the vendored library's own code (no second download) ----
class Layout {
  constructor() { this.cache = new Lru(256); this.jobs = new Map(); this.next = 0; this.ready = this.start(); }

  async start() {
    const lib = await gunzipText(window.vizexportViz);
    const main = () => {
      const viz = Viz.instance();  // eslint-disable-line no-undef
      onmessage = async (e) => {
        const { id, dot } = e.data;
        try { postMessage({ id, svg: (await viz).renderString(dot, { format: "svg" }) }); }
        catch (err) { postMessage({ id, error: String(err && err.message || err) }); }
      };
    };
    try {
      const url = URL.createObjectURL(new Blob([`${lib}\n;(${main})();`], { type: "text/javascript" }));
      this.worker = new Worker(url);
      this.worker.onmessage = (e) => { const done = this.jobs.get(e.data.id); this.jobs.delete(e.data.id); done(e.data); };
    } catch (err) {  // no workers here: the page's own thread lays out
      (0, eval)(lib);  // defines the global Viz
      this.viz = await Viz.instance();  // eslint-disable-line no-undef
    }
  }

  async svg(key, dot) {
    const hit = this.cache.get(key);
    if (hit) return hit;
    await this.ready;
    const result = this.worker
      ? await new Promise((done) => { const id = this.next++; this.jobs.set(id, done); this.worker.postMessage({ id, dot }); })
      : (() => { try { return { svg: this.viz.renderString(dot, { format: "svg" }) }; } catch (e) { return { error: String(e) }; } })();
    this.cache.set(key, result);
    return result;
  }
}

// ---- zoom, pan and fit: the picture's viewBox is the part of the graph the box shows ----
// Graphviz sizes its SVG in points; the view is a scale (CSS pixels per point) and the graph point at the box's
// top left. A new picture is fitted into the box (never enlarged past its own size) unless the person has zoomed or
// panned: then the other steps of that rewrite keep the view, so a change can be followed step by step.
const PT = 4 / 3;  // CSS pixels per point: 1:1 shows the graph at the size Graphviz gives it
const ZOOM_STEP = 1.25;  // the + and − buttons and keys
const WHEEL_RATE = 0.002;  // zoom per pixel of wheel travel (a trackpad's pinch arrives as a wheel with ctrlKey)
const LINE_PX = 16;  // a wheel that counts lines
const ZOOM_OUT = 4, ZOOM_IN = 8;  // how far past fit and past 1:1 the scale goes

class Zoom {
  constructor(box, changed) {
    Object.assign(this, { box, changed, svg: null, scale: PT, x: 0, y: 0, auto: true, pointers: new Map() });
    box.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    box.addEventListener("pointerdown", (e) => this.down(e));
    box.addEventListener("pointermove", (e) => this.move(e));
    for (const t of ["pointerup", "pointercancel"]) box.addEventListener(t, (e) => this.up(e));
    new ResizeObserver(() => this.apply()).observe(box);
  }

  attach(svg) {  // a new picture
    const vb = svg.viewBox.baseVal;
    this.bounds = { x: vb.x, y: vb.y, w: Math.max(vb.width, 1), h: Math.max(vb.height, 1) };
    svg.setAttribute("width", "100%");
    svg.setAttribute("height", "100%");
    this.svg = svg;
    this.apply();
  }

  detach() { this.svg = null; this.changed(this); }

  size() { return [Math.max(this.box.clientWidth, 1), Math.max(this.box.clientHeight, 1)]; }

  fitScale() {
    const [w, h] = this.size();
    return Math.min(PT, w / this.bounds.w, h / this.bounds.h);
  }

  fit() { this.auto = true; this.apply(); }

  center(scale) {  // the graph's middle in the box's middle, at `scale`
    const [w, h] = this.size(), b = this.bounds;
    Object.assign(this, { scale, x: b.x + (b.w - w / scale) / 2, y: b.y + (b.h - h / scale) / 2 });
  }

  zoomAt(factor, px, py) {  // scale by `factor`, keeping the graph point under (px, py) of the box where it is
    if (!this.svg) return;
    const lo = this.fitScale() / ZOOM_OUT, hi = PT * ZOOM_IN;
    const scale = Math.min(hi, Math.max(lo, this.scale * factor));
    this.x += px / this.scale - px / scale;
    this.y += py / this.scale - py / scale;
    Object.assign(this, { scale, auto: false });
    this.apply();
  }

  zoomCentered(factor) { const [w, h] = this.size(); this.zoomAt(factor, w / 2, h / 2); }

  actualSize() {  // from a fitted view, around the step's change (its new nodes), else around the view's middle
    const changed = this.auto && this.svg ? [...this.svg.querySelectorAll(".created, .rebuilt")] : [];
    if (!changed.length) { this.zoomCentered(PT / this.scale); return; }
    const r = this.box.getBoundingClientRect(), rects = changed.map((g) => g.getBoundingClientRect());
    const mid = (lo, hi) => (Math.min(...rects.map(lo)) + Math.max(...rects.map(hi))) / 2;
    const px = mid((q) => q.left, (q) => q.right) - r.left, py = mid((q) => q.top, (q) => q.bottom) - r.top;
    const [w, h] = this.size();
    this.zoomAt(PT / this.scale, px, py);
    this.panBy(w / 2 - px, h / 2 - py);  // and that point in the box's middle
  }

  panBy(dx, dy) { this.x -= dx / this.scale; this.y -= dy / this.scale; this.auto = false; this.apply(); }

  apply() {
    if (!this.svg) return;
    if (this.auto) this.center(this.fitScale());
    const [w, h] = this.size(), b = this.bounds, vw = w / this.scale, vh = h / this.scale;
    // some of the graph stays in view: the view's middle never leaves the graph's box
    this.x = Math.min(b.x + b.w - vw / 2, Math.max(b.x - vw / 2, this.x));
    this.y = Math.min(b.y + b.h - vh / 2, Math.max(b.y - vh / 2, this.y));
    this.svg.setAttribute("viewBox", `${this.x} ${this.y} ${vw} ${vh}`);
    this.changed(this);
  }

  wheel(e) {
    if (!this.svg) return;
    e.preventDefault();
    const r = this.box.getBoundingClientRect(), px = e.deltaMode === 1 ? LINE_PX : 1;
    this.zoomAt(Math.exp(-e.deltaY * px * WHEEL_RATE), e.clientX - r.left, e.clientY - r.top);
  }

  down(e) {
    if (!this.svg || (e.pointerType === "mouse" && e.button !== 0)) return;
    this.pointers.set(e.pointerId, [e.clientX, e.clientY]);
    this.box.setPointerCapture(e.pointerId);
    this.box.classList.add("panning");
  }

  move(e) {  // one pointer pans, two pinch
    const was = this.pointers.get(e.pointerId);
    if (!was) return;
    const now = [e.clientX, e.clientY];
    const other = [...this.pointers].find(([id]) => id !== e.pointerId)?.[1];
    this.pointers.set(e.pointerId, now);
    if (!other) { this.panBy(now[0] - was[0], now[1] - was[1]); return; }
    const r = this.box.getBoundingClientRect(), gap = (a) => Math.hypot(a[0] - other[0], a[1] - other[1]);
    this.zoomAt(gap(now) / Math.max(gap(was), 1), (now[0] + other[0]) / 2 - r.left, (now[1] + other[1]) / 2 - r.top);
  }

  up(e) {
    if (!this.pointers.delete(e.pointerId)) return;
    if (this.box.hasPointerCapture(e.pointerId)) this.box.releasePointerCapture(e.pointerId);
    if (!this.pointers.size) this.box.classList.remove("panning");
  }
}

// ---- the viewer ----
const keepInView = (list, item) => {  // scroll the list, not the page, to show its current item
  const top = item.offsetTop, bottom = top + item.offsetHeight;
  if (top < list.scrollTop || bottom > list.scrollTop + list.clientHeight) list.scrollTop = top - list.clientHeight / 2;
};
const note = (text) => Object.assign(document.createElement("p"), { className: "note", textContent: text });

const view = async () => {
  const pack = await readPack(window.vizexportPacks[config.context]);
  const nodes = new Nodes(pack), drawer = new Drawer(nodes), layout = new Layout(), graphs = new Lru(64);
  const drawn = new Lru(512);  // step → its graph, new nodes and DOT
  const rewrites = readSteps(pack);
  const where = (st) => (st.loc >= 0 ? `${pack.locs[st.loc][0].split("/").pop()}:${pack.locs[st.loc][1]}` : "");
  let r = 0, s = 0, generation = 0, busy = false, wanted = null, listed = -1, viewed = -1;
  const zoom = new Zoom($("graph"), (z) => {
    $("zoom-level").textContent = z.svg ? `${z.auto ? "fit, " : ""}${Math.round((100 * z.scale) / PT)}%` : "";
  });

  const stepGraph = (rw, k) => {  // graph, new nodes and DOT of step k of rewrite rw (as graphs/export draws it)
    const key = `${rw.index}:${k}`;
    let d = drawn.get(key);
    if (d) return d;
    const step = rw.steps[k], g = graphOf(nodes, step, graphs);
    if (!g) d = { g: null };
    else {
      const prev = k > 0 ? graphOf(nodes, rw.steps[k - 1], graphs) : null;
      const { created, rebuilt } = newNodes(nodes, step, prev, g);
      const hint = k === 0 && rw.steps.length > 1 ? rw.steps[1].before : undefined;
      d = { g, created, rebuilt, dot: drawer.draw(step, created, rebuilt, hint) };
    }
    drawn.set(key, d);
    return d;
  };

  const pump = async () => {  // one layout at a time; the newest step wanted goes next, skipped ones never
    if (busy || !wanted) return;
    const job = wanted;
    wanted = null;
    busy = true;
    const result = await layout.svg(job.key, job.dot);
    busy = false;
    if (job.generation === generation) showSvg(result, job.key);  // a late answer for an older step is dropped
    pump();
  };

  const showSvg = (result, key) => {
    const box = $("graph");
    if (result.error) {
      box.replaceChildren(note(`Graphviz could not lay out this graph: ${result.error}`));
      zoom.detach();
    } else {
      box.innerHTML = result.svg;
      zoom.attach(box.querySelector("svg"));
    }
    box.dataset.step = key;
    box.classList.remove("pending");
  };

  const listSteps = (rw) => {  // the step list of a rewrite, made once per rewrite shown
    const frag = document.createDocumentFragment();
    for (const st of rw.steps) {
      const li = document.createElement("li");
      const num = Object.assign(document.createElement("span"), { className: "num", textContent: String(st.i) });
      li.append(num, st.i === 0 ? "input graph" : where(st) || "match");
      if (st.error) li.classList.add("error");
      li.addEventListener("click", () => { s = st.i; show(); });
      frag.append(li);
    }
    $("step-list").replaceChildren(frag);
    listed = rw.index;
  };

  const show = () => {
    const rw = rewrites[r], step = rw.steps[s], key = `${r}:${s}`;
    generation++;
    if (viewed !== r) { zoom.auto = true; viewed = r; }  // another rewrite's graphs: fitted again
    $("position").textContent = `${r}. ${rw.name} · step ${s} of ${rw.steps.length - 1}`;
    const d = stepGraph(rw, s);
    const info = [];
    if (step.loc >= 0) info.push(`pattern ${pack.locs[step.loc][0]}:${pack.locs[step.loc][1]}`);
    if (step.seconds != null) info.push(`${(step.seconds * 1e6).toFixed(1)} µs`);
    if (d.g) info.push(`${d.g.order.length} nodes`, `${d.created.size} created`, `${d.rebuilt.size} rebuilt`);
    if (d.dot && d.dot.capped) info.push(`large graph: ${d.dot.nodes} of ${d.dot.total} nodes around the change`);
    if (step.error) info.push(`error: ${step.error}`);
    $("step-info").textContent = info.join(" · ");
    const box = $("graph");
    if (!d.g) {
      box.replaceChildren(note("This step could not be replayed (see the error above): there is no graph to show."));
      zoom.detach();
      box.dataset.step = key;
      box.classList.remove("pending");
    } else {
      box.classList.add("pending");  // the previous picture stays, greyed, until this one is laid out
      wanted = { key, dot: d.dot.text, generation };
      pump();
    }
    $("diff").textContent = step.before >= 0 && step.after >= 0
      ? unifiedDiff(pretty(nodes, step.before), pretty(nodes, step.after)).join("\n") : "";
    $("prev").disabled = s === 0;
    $("next").disabled = s >= rw.steps.length - 1;
    if (listed !== r) listSteps(rw);
    const list = $("step-list");
    list.querySelector(".current")?.classList.remove("current");
    const li = list.children[s];
    li.classList.add("current");
    keepInView(list, li);
    document.querySelector("#rewrite-list a.current")?.classList.remove("current");
    const link = document.querySelector(`#rewrite-list a[data-rewrite="${r}"]`);
    link.classList.add("current");
    keepInView($("rewrite-list"), link.parentElement);
    history.replaceState(null, "", `#r${r}s${s}`);
  };

  const go = (dr, ds) => {
    if (dr) { r = Math.max(0, Math.min(rewrites.length - 1, r + dr)); s = 0; }
    else s = Math.max(0, Math.min(rewrites[r].steps.length - 1, s + ds));
    show();
  };
  $("prev").addEventListener("click", () => go(0, -1));
  $("next").addEventListener("click", () => go(0, 1));
  const zoomKeys = { f: () => zoom.fit(), 1: () => zoom.actualSize(), "+": () => zoom.zoomCentered(ZOOM_STEP),
                     "=": () => zoom.zoomCentered(ZOOM_STEP), "-": () => zoom.zoomCentered(1 / ZOOM_STEP) };
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const k = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
    if (k) { e.preventDefault(); go(...k); } else if (zoomKeys[e.key]) { e.preventDefault(); zoomKeys[e.key](); }
  });
  $("zoom-fit").addEventListener("click", () => zoom.fit());
  $("zoom-actual").addEventListener("click", () => zoom.actualSize());
  $("zoom-in").addEventListener("click", () => zoom.zoomCentered(ZOOM_STEP));
  $("zoom-out").addEventListener("click", () => zoom.zoomCentered(1 / ZOOM_STEP));
  $("rewrite-list").replaceChildren(...rewrites.map((rw) => {  // numbered, indented by nesting depth
    const li = document.createElement("li"), a = document.createElement("a");
    li.style.paddingLeft = `${rw.depth * 0.8}em`;
    Object.assign(a, { href: `#r${rw.index}`, textContent: rw.name || "rewrite" });
    a.dataset.rewrite = rw.index;
    a.addEventListener("click", (e) => { e.preventDefault(); r = rw.index; s = 0; show(); });
    const num = Object.assign(document.createElement("span"), { className: "num", textContent: String(rw.index) });
    const count = Object.assign(document.createElement("span"), { className: "muted",
                                                                  textContent: (rw.steps.length - 1).toLocaleString("en") });
    li.append(num, a, count);
    return li;
  }));
  const m = location.hash.match(/^#r(\d+)(?:s(\d+))?$/);
  if (m) { r = Math.min(+m[1], rewrites.length - 1); s = Math.min(+(m[2] || 0), rewrites[r].steps.length - 1); }
  window.vizexportViewer = {  // for tests: the viewer's state and a way to jump
    nodes, rewrites, stepGraph, zoom, go: (rr, ss) => { r = rr; s = ss; show(); }, shown: () => `${r}:${s}`,
    diff: (step) => unifiedDiff(pretty(nodes, step.before), pretty(nodes, step.after)),
  };
  show();
};

view().catch((e) => { $("graph").replaceChildren(note(`The step viewer failed: ${e}`)); throw e; });
