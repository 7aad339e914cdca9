// kprof HTML report: draws the data that kprof-viewer / kprof-analyze computed (JSON above).
// Plain JS, no libraries.  Text from the profile reaches the screen only through textContent and
// the canvas, never as HTML.
"use strict";
(function () {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("kprof-data").textContent);
  const parsed = performance.now();
  // Columns of fractional numbers come as base64 float32 (NaN: no value), instruction lists as
  // tables: see profiler/viewer/html_report.py, pack().
  function column(c) {
    if (Array.isArray(c)) return c;
    const bin = atob(c.f32), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const f = new Float32Array(bytes.buffer), out = new Array(f.length);
    for (let i = 0; i < f.length; i++) out[i] = Number.isNaN(f[i]) ? null : f[i];
    return out;
  }
  function table(t) {
    if (Array.isArray(t)) return t;
    return t.rows.map((r) => ({ pc: r[0], text: r[1], file: t.files[r[2]], line: r[3], samples: r[4], stalls: r[5] || {} }));
  }
  for (const m of D.metrics) for (const k of ["values", "a", "b", "d"]) if (m[k] !== undefined) m[k] = column(m[k]);
  const decoded = performance.now();
  if (!Array.isArray(D.tree.kernel)) {
    const k = new Int32Array(D.tree.kernel.n).fill(-1);
    for (const [i, p] of D.tree.kernel.pairs) k[i] = p;
    D.tree.kernel = k;
  }
  const T = D.tree, N = T.parent.length, DIFF = D.other !== null && D.other !== undefined;
  const $ = (id) => document.getElementById(id);
  const ROW = 18;

  // --- small DOM helpers ----------------------------------------------------------------------
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function fmt(v, kind) {
    if (v === null || v === undefined) return "";
    if (kind === "share") return v.toFixed(1);
    const a = Math.abs(v);
    if (Number.isInteger(v) && a < 1e15) return String(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return v.toFixed(3);
  }
  function signed(v, kind) { const s = fmt(v, kind); return v > 0 ? "+" + s : s; }
  function pct(x) { return (100 * x).toFixed(1) + "%"; }
  const base = (f) => (f || "").replace(/\\/g, "/").split("/").pop();

  // --- tree structure -------------------------------------------------------------------------
  const kids = new Array(N);
  const depth = new Int32Array(N);
  for (let i = 0; i < N; i++) kids[i] = [];
  for (let i = 1; i < N; i++) { kids[T.parent[i]].push(i); depth[i] = depth[T.parent[i]] + 1; }
  const nameOf = (i) => T.names[T.name[i]];
  const built = performance.now();
  const M = D.metrics;
  const vals = (m) => (DIFF ? null : m.values);

  // --- state ----------------------------------------------------------------------------------
  let metric = 0, zoom = 0, selected = -1;
  let width = new Float64Array(N);       // layout width of each frame (filtered, summable)
  let keep = new Uint8Array(N).fill(1);  // frames that pass include/exclude
  let changed = new Uint8Array(N);       // frames whose subtree lost frames to the filters
  let filtered = {};                      // metric index -> filtered summable values
  let rects = [];                         // per row: [{i, x, w}] drawn, sorted by x

  function widthMetric() {
    if (M[metric] && M[metric].additive) return metric;
    const j = M.findIndex((m) => m.additive);
    return j < 0 ? metric : j;
  }
  function rawWidth(j) {
    const m = M[j], out = new Float64Array(N);
    for (let i = 0; i < N; i++) {
      let v = DIFF ? Math.max(Math.abs(m.a[i] || 0), Math.abs(m.b[i] || 0)) : m.values[i];
      out[i] = v > 0 ? v : 0;
    }
    return out;
  }
  // Filtered sums as kprof-viewer -i/-e re-totals them: a kept frame keeps its own value and
  // adds its kept children.
  function refilter(src) {
    const own = new Float64Array(N), out = new Float64Array(N);
    for (let i = 0; i < N; i++) own[i] = src[i];
    for (let i = 1; i < N; i++) own[T.parent[i]] -= src[i];
    for (let i = N - 1; i >= 0; i--) {
      if (!keep[i]) continue;
      if (!changed[i]) { out[i] = src[i]; } else { out[i] += Math.max(own[i], 0); }
      if (i > 0 && keep[T.parent[i]]) out[T.parent[i]] += out[i];
    }
    // an unchanged frame's total is its stored value; parents added it above already
    return out;
  }
  function applyFilters() {
    const msg = $("filter-msg");
    msg.textContent = "";
    let inc = null, exc = null;
    try { inc = $("include").value ? new RegExp($("include").value) : null; }
    catch (e) { msg.textContent = "include: " + e.message; }
    try { exc = $("exclude").value ? new RegExp($("exclude").value) : null; }
    catch (e) { msg.textContent = "exclude: " + e.message; }
    const inMatch = new Uint8Array(N), keepInc = new Uint8Array(N), out = new Uint8Array(N);
    for (let i = 0; i < N; i++) {
      const p = T.parent[i];
      inMatch[i] = (!inc || (p >= 0 && inMatch[p]) || (i > 0 && inc.test(nameOf(i)))) ? 1 : 0;
    }
    for (let i = N - 1; i >= 0; i--) {
      if (inMatch[i]) keepInc[i] = 1;
      if (i === 0) keepInc[i] = 1;
      if (keepInc[i] && i > 0) keepInc[T.parent[i]] = 1;
    }
    for (let i = 0; i < N; i++) {
      const p = T.parent[i];
      out[i] = i === 0 ? 1 : (keepInc[i] && out[p] && !(exc && exc.test(nameOf(i))) ? 1 : 0);
    }
    keep = out;
    changed = new Uint8Array(N);
    for (let i = N - 1; i > 0; i--) {
      if (!keep[i] || changed[i]) changed[T.parent[i]] = 1;
    }
    if (!keep[zoom]) zoom = 0;
    filtered = {};
    relayout();
  }
  function filteredValue(j, i) {
    const m = M[j];
    if (DIFF) return null;
    if (!changed[i]) return m.values[i];
    if (!m.additive) return undefined; // not re-totalled here: kprof-viewer -i/-e does it
    if (!filtered[j]) filtered[j] = refilter(Float64Array.from(m.values, (v) => v || 0));
    return filtered[j][i];
  }
  function relayout() {
    width = refilter(rawWidth(widthMetric()));
    for (let i = 0; i < N; i++) kids[i].sort((x, y) => width[y] - width[x]);
    draw();
  }

  // --- flame graph ----------------------------------------------------------------------------
  const canvas = $("flame"), box = $("flame-box"), tip = $("tooltip");
  const g = canvas.getContext("2d");
  g.font = "12px ui-monospace, monospace";
  const charW = g.measureText("M").width || 7;

  function heat(i, ref, maxv) {
    const m = M[metric];
    if (DIFF) {
      const d = m.d[i], a = Math.abs(m.a[i] || 0), b = Math.abs(m.b[i] || 0);
      if (T.side[i] === 2) return "hsl(210,15%,80%)";
      if (d === null || d === undefined || d === 0) return "hsl(0,0%,88%)";
      const r = Math.min(1, Math.abs(d) / (Math.max(a, b) || 1));
      return d > 0 ? `hsl(0,75%,${92 - 42 * r}%)` : `hsl(215,75%,${92 - 42 * r}%)`;
    }
    const v = m.additive ? filteredValue(metric, i) : m.values[i];
    if (v === null || v === undefined) return "hsl(0,0%,86%)";
    const f = Math.max(0, Math.min(1, v / ((m.additive ? ref : maxv) || 1)));
    return `hsl(${48 - 46 * f},${80 + 10 * f}%,${78 - 28 * f}%)`;
  }

  function layout(W) {
    const chain = [];
    for (let i = zoom; i >= 0; i = T.parent[i]) chain.unshift(i);
    const out = chain.slice(0, -1).map((i, r) => ({ i, x: 0, w: W, row: r }));
    const stack = [{ i: zoom, x: 0, w: W, row: chain.length - 1 }];
    while (stack.length) {
      const r = stack.pop();
      out.push(r);
      const ks = kids[r.i];
      let total = 0;
      for (const c of ks) if (keep[c]) total += width[c];
      const denom = Math.max(width[r.i], total);
      if (!(denom > 0)) continue;
      let x = r.x;
      for (const c of ks) {
        if (!keep[c]) continue;
        const w = (width[c] / denom) * r.w;
        if (w < 0.5) break; // children are sorted widest first: the rest are narrower still
        stack.push({ i: c, x, w, row: r.row + 1 });
        x += w;
      }
    }
    return out;
  }

  function draw() {
    const W = Math.max(200, box.clientWidth - 2), dpr = window.devicePixelRatio || 1;
    const all = layout(W);
    let rows = 0, maxv = 0;
    for (const r of all) {
      rows = Math.max(rows, r.row + 1);
      const v = DIFF ? 0 : M[metric].values[r.i];
      if (v > maxv) maxv = v;
    }
    const H = rows * ROW;
    canvas.width = Math.floor(W * dpr); canvas.height = Math.floor(H * dpr);
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.font = "12px ui-monospace, monospace";
    g.textBaseline = "middle";
    const ref = DIFF ? 0 : filteredValue(metric, zoom);
    rects = [];
    for (let k = 0; k < rows; k++) rects.push([]);
    for (const r of all) {
      const y = r.row * ROW;
      g.fillStyle = heat(r.i, ref, maxv);
      g.fillRect(r.x, y, Math.max(r.w - 0.5, 0.5), ROW - 1);
      if (T.kernel[r.i] >= 0) { g.fillStyle = "#6f42c1"; g.fillRect(r.x, y, Math.max(r.w - 0.5, 0.5), 2); }
      if (r.i === selected) { g.strokeStyle = "#000"; g.lineWidth = 2; g.strokeRect(r.x + 1, y + 1, r.w - 2, ROW - 3); }
      if (r.w > 3 * charW) {
        const name = nameOf(r.i), n = Math.floor((r.w - 6) / charW);
        g.fillStyle = "#1f2328";
        g.fillText(name.length > n ? name.slice(0, n - 1) + "\u2026" : name, r.x + 3, y + ROW / 2);
      }
      rects[r.row].push(r);
    }
    for (const row of rects) row.sort((p, q) => p.x - q.x);
    legend();
  }

  function hit(ev) {
    const b = canvas.getBoundingClientRect();
    const x = ev.clientX - b.left, row = Math.floor((ev.clientY - b.top) / ROW);
    const rs = rects[row];
    if (!rs) return null;
    let lo = 0, hi = rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, r = rs[mid];
      if (x < r.x) hi = mid - 1; else if (x >= r.x + r.w) lo = mid + 1; else return r.i;
    }
    return null;
  }

  function valueLines(i) {
    const out = [];
    M.forEach((m, j) => {
      if (DIFF) {
        out.push(`${m.name}: ${signed(m.d[i], m.kind)}  (${fmt(m.a[i], m.kind) || "-"} vs ${fmt(m.b[i], m.kind) || "-"})`);
        return;
      }
      const v = filteredValue(j, i);
      if (v === undefined) { out.push(`${m.name}: (not re-totalled under the filter)`); return; }
      if (v === null) return;
      let s = `${m.name}: ${fmt(v, m.kind)}`;
      if (m.additive) {
        const tot = filteredValue(j, 0);
        if (tot) s += `  (${pct(v / tot)} of total)`;
      }
      out.push(s);
    });
    return out;
  }
  function frameSide(i) {
    if (!DIFF) return "";
    return T.side[i] === 1 ? ` (only in ${D.profile})` : T.side[i] === 2 ? ` (only in ${D.other})` : "";
  }

  canvas.addEventListener("mousemove", (ev) => {
    const i = hit(ev);
    if (i === null) { tip.hidden = true; return; }
    tip.textContent = nameOf(i) + frameSide(i) + "\n" + valueLines(i).join("\n");
    tip.hidden = false;
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = ev.clientY + 16 + tip.offsetHeight > window.innerHeight ? ev.clientY - tip.offsetHeight - 8 : ev.clientY + 16;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("click", (ev) => {
    const i = hit(ev);
    if (i === null) return;
    select(i);
    zoom = i;
    draw();
  });

  function select(i) {
    selected = i;
    const p = clear($("details"));
    p.appendChild(el("div", "name", nameOf(i) + frameSide(i)));
    const path = [];
    for (let k = T.parent[i]; k > 0; k = T.parent[k]) path.unshift(nameOf(k));
    if (path.length) p.appendChild(el("div", "notes", "in " + path.join(" \u203a ")));
    const t = el("table", "grid");
    M.forEach((m, j) => {
      const tr = el("tr");
      tr.appendChild(el("th", "l", m.name));
      if (DIFF) {
        tr.appendChild(el("td", "", signed(m.d[i], m.kind)));
        tr.appendChild(el("td", "", fmt(m.a[i], m.kind)));
        tr.appendChild(el("td", "", fmt(m.b[i], m.kind)));
      } else {
        const v = filteredValue(j, i);
        tr.appendChild(el("td", "", v === undefined ? "n/a under the filter" : fmt(v, m.kind)));
      }
      t.appendChild(tr);
    });
    if (DIFF) {
      const h = el("tr");
      ["", "change", D.profile, D.other].forEach((s) => h.appendChild(el("th", "", s)));
      t.insertBefore(h, t.firstChild);
    }
    p.appendChild(t);
    const k = T.kernel[i];
    if (k >= 0) {
      const b = el("button", "open-kernel", "open kernel page: " + D.kernels[k].name);
      b.addEventListener("click", () => { location.hash = "#kernel/" + k; });
      p.appendChild(b);
    }
    // a sampled line frame under a kernel: open the kernel page on that line
    const pk = i > 0 ? T.kernel[T.parent[i]] : -1, m = /^(.*?):(\d+)(?:@.*)?$/.exec(nameOf(i));
    if (pk >= 0 && m) {
      const where = base(m[1]) + ":" + m[2];
      const b = el("button", "open-line", `open ${D.kernels[pk].name} at ${where}`);
      b.addEventListener("click", () => { location.hash = `#kernel/${pk}/line/${encodeURIComponent(where)}`; });
      p.appendChild(b);
    }
  }

  function legend() {
    const l = clear($("legend"));
    const m = M[metric];
    if (!m) return;
    if (DIFF) {
      l.appendChild(el("span", "", `colour: change in ${m.name}, ${D.profile} minus ${D.other}:`));
      [["hsl(0,75%,55%)", `${D.profile} has more`], ["hsl(215,75%,55%)", "less"],
       ["hsl(210,15%,80%)", `only in ${D.other}`]].forEach(([c, s]) => l.appendChild(swatch(c, s)));
    } else {
      const rel = m.additive ? "share of the zoomed frame" : "relative to the largest value shown";
      l.appendChild(el("span", "", `colour: ${m.name}, ${rel}; width: ${M[widthMetric()].name}`));
      [["hsl(48,80%,78%)", "low"], ["hsl(2,90%,50%)", "high"], ["hsl(0,0%,86%)", "no value"]]
        .forEach(([c, s]) => l.appendChild(swatch(c, s)));
    }
    l.appendChild(swatch("#6f42c1", "kernel with a page (purple top edge)"));
  }
  function swatch(color, label) {
    const s = el("span"), sw = el("span", "sw");
    sw.style.background = color;
    s.appendChild(sw); s.appendChild(document.createTextNode(label));
    return s;
  }

  // --- virtual list: only the rows in view exist in the DOM ----------------------------------
  function VList(container, count, renderRow) {
    const spacer = el("div", "spacer");
    clear(container).appendChild(spacer);
    spacer.style.height = count * ROW + "px";
    let pending = false;
    const api = {
      count,
      render() {
        pending = false;
        const top = container.scrollTop, h = container.clientHeight || 400;
        const a = Math.max(0, Math.floor(top / ROW) - 10), b = Math.min(count, Math.ceil((top + h) / ROW) + 10);
        clear(spacer);
        for (let i = a; i < b; i++) {
          const row = renderRow(i);
          row.classList.add("vrow");
          row.dataset.index = i;
          row.style.top = i * ROW + "px";
          spacer.appendChild(row);
        }
      },
      show(i) {
        const top = i * ROW, h = container.clientHeight || 400;
        if (top < container.scrollTop || top + ROW > container.scrollTop + h) container.scrollTop = Math.max(0, top - h / 3);
        api.render();
      },
    };
    container.onscroll = () => { if (!pending) { pending = true; requestAnimationFrame(api.render); } };
    api.render();
    return api;
  }

  // --- kernel pages ---------------------------------------------------------------------------
  const PALETTE = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                   "#1f77b4", "#7f7f7f", "#aec7e8", "#ffbb78", "#c5b0d5", "#c49c94", "#f7b6d2"];
  let kp = null; // the kernel page shown: {k, rows, sass, lineOf, ...}

  function stallColors(k) {
    const tot = {};
    for (const ln of k.lines) for (const r in ln.stalls) tot[r] = (tot[r] || 0) + ln.stalls[r];
    for (const ins of k.instructions) if (!k.lines.length) for (const r in ins.stalls) tot[r] = (tot[r] || 0) + ins.stalls[r];
    const order = Object.keys(tot).filter((r) => r !== "selected").sort((a, b) => tot[b] - tot[a]);
    const c = { selected: "#2da44e" };
    order.forEach((r, i) => { c[r] = PALETTE[i % PALETTE.length]; });
    return { c, order: (tot.selected ? ["selected"] : []).concat(order), tot };
  }
  function reasonTitle(r) { const d = D.reasons[r]; return d ? `${r}: ${d.title}. ${d.meaning}` : r; }
  function bar(stalls, samples, scale, colors) {
    const b = el("span", "bar");
    if (!samples) return b;
    const keys = Object.keys(stalls).sort((x, y) => stalls[y] - stalls[x]);
    let used = 0;
    for (const r of keys) {
      const s = el("span");
      s.style.width = (90 * stalls[r] / scale) + "px";
      s.style.background = colors.c[r] || "#999";
      s.title = r;
      b.appendChild(s);
      used += stalls[r];
    }
    if (samples > used) { // samples without a reason recorded
      const s = el("span"); s.style.width = (90 * (samples - used) / scale) + "px"; s.style.background = "#bbb";
      b.appendChild(s);
    }
    return b;
  }
  function mix(stalls, total, colors) {
    const wrap = el("div");
    const m = el("div", "mix");
    const keys = Object.keys(stalls).sort((x, y) => stalls[y] - stalls[x]);
    for (const r of keys) {
      const s = el("span"); s.style.width = (100 * stalls[r] / total) + "%"; s.style.background = colors.c[r] || "#999";
      s.title = reasonTitle(r);
      m.appendChild(s);
    }
    wrap.appendChild(m);
    wrap.appendChild(el("div", "notes", keys.map((r) => `${r} ${pct(stalls[r] / total)}`).join(", ")));
    return wrap;
  }

  function showKernel(k, line) {
    const K = D.kernels[k];
    if (!K) { route("#tree"); return; }
    K.instructions = table(K.instructions);
    for (const a of K.analysis || []) a.sass = table(a.sass);
    $("tree-view").hidden = true; $("kernel-view").hidden = false;
    $("kernel-select").value = String(k);
    const A = K.analysis && K.analysis.length ? K.analysis[0] : null;
    $("k-name").textContent = K.name;
    const colors = stallColors(K);
    // facts
    const f = clear($("k-facts")), F = Object.assign({}, K.facts, A ? A.facts : {});
    const fact = (label, v) => { if (v === null || v === undefined || v === "") return; const s = el("span"); s.appendChild(el("b", "", label + ": ")); s.appendChild(document.createTextNode(String(v))); f.appendChild(s); };
    if (K.time_ns) fact("time", fmt(K.time_ns / 1e6, "time") + " ms");
    if (K.count) fact("launches", K.count);
    fact("samples", K.samples ? `${K.samples} (${pct(K.stalled / K.samples)} stalled)` : "none");
    if (F.grid) fact("grid", [].concat(F.grid).join("x"));
    fact("warps", F.num_warps); fact("stages", F.num_stages);
    fact("registers", F.n_regs); fact("spill bytes", F.n_spills);
    if (F.shared !== undefined && F.shared !== null) fact("shared memory", F.shared >= 1024 ? (F.shared / 1024).toFixed(1) + " KiB" : F.shared + " B");
    if (F.occupancy) fact("occupancy", F.occupancy);
    fact("target", F.target); fact("build", F.origin);
    if (F.constexprs) fact("constexprs", Object.entries(F.constexprs).map(([a, b]) => `${a}=${b}`).join(", "));
    if (F.cache_key) fact("cache key", String(F.cache_key).slice(0, 12));
    const notes = clear($("k-notes"));
    if (K.frames.length > 1) notes.appendChild(el("div", "", `${K.frames.length} frames merged: ${K.frames.join("; ")}`));
    if (A) for (const n of A.notes || []) notes.appendChild(el("div", "", "note: " + n));
    if (K.analysis && K.analysis.length > 1) notes.appendChild(el("div", "", `${K.analysis.length} compiled variants analysed; SASS and facts shown for the hottest`));
    // stall legend
    const lg = clear($("k-stall-legend"));
    for (const r of colors.order) { const s = swatch(colors.c[r], r); s.title = reasonTitle(r); lg.appendChild(s); }
    // rows: the stored source, then sampled lines outside it
    const stat = {};
    for (const ln of K.lines) stat[base(ln.file) + ":" + ln.line] = ln;
    const rows = [], srcBase = K.source ? base(K.source.file) : null;
    const used = {};
    if (K.source) {
      K.source.lines.forEach((text, i) => {
        const no = K.source.first_line + i;
        const key = (srcBase || (K.lines.find((l) => l.line === no) || {}).file || "") + ":" + no;
        const s = stat[key] || (srcBase ? null : K.lines.find((l) => l.line === no)) || null;
        if (s) used[base(s.file) + ":" + s.line] = 1;
        rows.push({ file: srcBase, line: no, text, s });
      });
    }
    for (const ln of K.lines) {
      const key = base(ln.file) + ":" + ln.line;
      if (!used[key] && ln.samples) rows.push({ file: base(ln.file), line: ln.line, text: "", s: ln, other: true });
    }
    const maxLine = Math.max(1, ...rows.map((r) => (r.s ? r.s.samples : 0)));
    const sass = A && A.sass && A.sass.length ? A.sass : K.instructions;
    $("sass-title").textContent = A && A.sass && A.sass.length
      ? `SASS (${sass.length} instructions, from the build)` : `SASS (${sass.length} sampled instructions, from the profile)`;
    $("src-title").textContent = K.source ? `source: ${K.source.file}` : "sampled lines (the profile stores no source text)";
    const maxIns = Math.max(1, ...sass.map((x) => x.samples || 0));
    const diagsByLine = {};
    for (const a of K.analysis || []) for (const d of a.diagnostics || []) {
      if (d.line !== null && d.line !== undefined) (diagsByLine[base(d.file || srcBase) + ":" + d.line] = diagsByLine[base(d.file || srcBase) + ":" + d.line] || []).push(d);
    }
    const key = (file, ln) => base(file || srcBase) + ":" + ln;
    kp = { k, rows, sass, sel: null, colors };
    kp.src = VList($("src-list"), rows.length, (i) => {
      const r = rows[i], row = el("div");
      row.appendChild(el("span", "no", r.other ? `${r.file}:${r.line}` : r.line));
      row.appendChild(bar(r.s ? r.s.stalls : {}, r.s ? r.s.samples : 0, maxLine, colors));
      row.appendChild(el("span", "n", r.s && r.s.samples ? r.s.samples : ""));
      row.appendChild(el("span", "pct", r.s && r.s.samples && K.samples ? pct(r.s.samples / K.samples) : ""));
      for (const d of diagsByLine[key(r.file, r.line)] || []) { // before the text: long lines are cut
        const b = el("span", "badge " + d.severity, d.id);
        b.title = d.severity + ": " + d.message;
        row.appendChild(b);
      }
      row.appendChild(el("span", "txt", r.other ? "(outside the stored source)" : r.text));
      if (kp.sel && kp.sel === key(r.file, r.line)) row.classList.add("sel");
      row.addEventListener("click", () => selectLine(key(r.file, r.line), "src"));
      return row;
    });
    kp.asm = VList($("sass-list"), sass.length, (i) => {
      const x = sass[i], row = el("div");
      row.appendChild(el("span", "pc", x.pc.toString(16).padStart(4, "0")));
      row.appendChild(bar(x.stalls || {}, x.samples || 0, maxIns, colors));
      row.appendChild(el("span", "n", x.samples ? x.samples : ""));
      row.appendChild(el("span", "txt", x.text));
      row.appendChild(el("span", "ln", x.line !== null && x.line !== undefined ? x.line : ""));
      if (kp.sel && x.line !== null && x.line !== undefined && key(x.file, x.line) === kp.sel) row.classList.add("linked");
      row.addEventListener("click", () => { if (x.line !== null && x.line !== undefined) selectLine(key(x.file, x.line), "sass", i); });
      return row;
    });
    kp.keyOf = key;
    // the hot instruction and its stall mix
    const hot = clear($("k-hot"));
    const top = sass.reduce((b, x) => ((x.samples || 0) > ((b && b.samples) || 0) ? x : b), null);
    if (top && top.samples) {
      hot.appendChild(el("div", "", `hot instruction: ${top.text} at 0x${top.pc.toString(16)}` +
        (top.line !== null && top.line !== undefined ? `, line ${top.line}` : "") +
        ` (${top.samples} samples, ${K.samples ? pct(top.samples / K.samples) : "?"} of the kernel)`));
      hot.appendChild(mix(top.stalls || {}, top.samples, colors));
      const go = el("a", "", "show it");
      go.addEventListener("click", () => { if (top.line !== null && top.line !== undefined) selectLine(key(top.file, top.line), "sass", sass.indexOf(top)); });
      hot.appendChild(go);
    } else {
      hot.appendChild(el("div", "notes", K.samples ? "the profile has this kernel's samples per line, not per instruction"
        : "no instruction samples for this kernel (profile it with mode=\"pcsampling\" to get them)"));
    }
    diagnoses(K);
    clear($("k-line"));
    if (line) selectLine(line, "src");
  }

  function selectLine(k, from, sassIndex) {
    if (!kp) return;
    kp.sel = k;
    const K = D.kernels[kp.k];
    const ri = kp.rows.findIndex((r) => kp.keyOf(r.file, r.line) === k);
    if (ri >= 0 && from !== "src") kp.src.show(ri); else kp.src.render();
    const first = kp.sass.findIndex((x) => x.line !== null && x.line !== undefined && kp.keyOf(x.file, x.line) === k);
    if (from === "sass" && sassIndex !== undefined) kp.asm.show(sassIndex);
    else if (first >= 0) kp.asm.show(first); else kp.asm.render();
    const p = clear($("k-line"));
    const r = ri >= 0 ? kp.rows[ri] : null, s = r ? r.s : null;
    const n = kp.sass.filter((x) => x.line !== null && x.line !== undefined && kp.keyOf(x.file, x.line) === k).length;
    p.appendChild(el("div", "name", `line ${k}` + (r && r.text ? ":  " + r.text.trim() : "")));
    p.appendChild(el("div", "", `${n} instruction${n === 1 ? "" : "s"}` + (s && s.samples ? `, ${s.samples} samples (${pct(s.samples / (K.samples || 1))} of the kernel)` : ", no samples")));
    if (s && s.samples) {
      p.appendChild(mix(s.stalls, s.samples, kp.colors));
      const ops = Object.entries(s.opcodes || {});
      if (ops.length) p.appendChild(el("div", "notes", "instructions sampled: " + ops.map(([o, c]) => `${o} (${c})`).join(", ")));
    }
    for (const a of K.analysis || []) for (const d of a.diagnostics || []) {
      if (d.line !== null && d.line !== undefined && kp.keyOf(d.file, d.line) === k) p.appendChild(diagCard(d));
    }
    const h = `#kernel/${kp.k}/line/${encodeURIComponent(k)}`;
    if (location.hash !== h) history.replaceState(null, "", h);
  }

  function diagCard(d) {
    const c = el("div", "diag " + d.severity);
    c.appendChild(el("div", "head", `${d.severity.toUpperCase()} ${d.id} (${d.number}. ${d.title})` + (d.line !== null && d.line !== undefined ? `  ${base(d.file)}:${d.line}` : "")));
    c.appendChild(el("div", "", d.message));
    if (d.source) c.appendChild(el("pre", "", d.source.trim()));
    const ev = Object.entries(d.evidence || {}).filter(([, v]) => typeof v !== "object");
    if (ev.length) c.appendChild(el("div", "notes", "evidence: " + ev.map(([a, v]) => `${a}=${typeof v === "number" ? +v.toPrecision(4) : v}`).join(", ")));
    c.appendChild(el("div", "", "fix: " + d.fix));
    if (d.line !== null && d.line !== undefined) {
      const go = el("a", "", "go to line");
      go.addEventListener("click", () => selectLine(kp.keyOf(d.file, d.line), "diag"));
      c.appendChild(go);
    }
    return c;
  }

  function diagnoses(K) {
    const box = clear($("k-diags")), at = clear($("k-autotune"));
    for (const a of K.analysis || []) {
      box.appendChild(el("h2", "", "diagnoses" + (K.analysis.length > 1 ? ` (${a.label})` : "")));
      if (!(a.diagnostics || []).length) box.appendChild(el("div", "notes", "no problems found"));
      for (const d of a.diagnostics || []) box.appendChild(diagCard(d));
      if (a.autotune) {
        at.appendChild(el("h2", "", "suggested configs"));
        at.appendChild(el("pre", "code autotune", a.autotune));
        if (a.override) at.appendChild(el("div", "notes", `try one without editing the code: KERNELC_OVERRIDE='${a.override}' python your_script.py`));
      }
    }
  }

  // --- tree page, kernel table, routing -------------------------------------------------------
  function kernelTable() {
    const t = clear($("kernel-table"));
    const h = el("tr");
    ["kernel", "time (ms)", "launches", "samples", "findings"].forEach((s, i) => h.appendChild(el("th", i ? "" : "l", s)));
    t.appendChild(h);
    const order = D.kernels.map((k, i) => i).sort((a, b) => (D.kernels[b].time_ns || 0) - (D.kernels[a].time_ns || 0));
    for (const i of order) {
      const K = D.kernels[i], tr = el("tr"), td = el("td", "l name"), a = el("a", "", K.name);
      a.href = "#kernel/" + i;
      td.appendChild(a); tr.appendChild(td);
      tr.appendChild(el("td", "", K.time_ns ? fmt(K.time_ns / 1e6, "time") : ""));
      tr.appendChild(el("td", "", K.count || ""));
      tr.appendChild(el("td", "", K.samples || ""));
      const nf = (K.analysis || []).reduce((n, a) => n + (a.diagnostics || []).filter((d) => d.severity !== "info").length, 0);
      tr.appendChild(el("td", "", K.analysis && K.analysis.length ? nf : ""));
      t.appendChild(tr);
    }
    if (!D.kernels.length) t.appendChild(el("tr")).appendChild(el("td", "l", "no kernel with samples, source or build records in this profile"));
    const sel = clear($("kernel-select"));
    sel.appendChild(el("option", "", "\u2014")).value = "";
    D.kernels.forEach((K, i) => { const o = el("option", "", K.name); o.value = String(i); sel.appendChild(o); });
    sel.addEventListener("change", () => { if (sel.value !== "") location.hash = "#kernel/" + sel.value; });
  }

  function route(h) {
    const hash = h || location.hash;
    const m = /^#kernel\/(\d+)(?:\/line\/(.+))?$/.exec(hash);
    if (m) { showKernel(+m[1], m[2] ? decodeURIComponent(m[2]) : null); return; }
    $("kernel-view").hidden = true; $("tree-view").hidden = false;
    $("kernel-select").value = "";
    draw();
  }

  // --- start ----------------------------------------------------------------------------------
  $("title").textContent = DIFF ? `${D.profile} minus ${D.other}` : D.profile;
  const msel = $("metric");
  M.forEach((m, j) => { const o = el("option", "", m.name); o.value = String(j); msel.appendChild(o); });
  msel.addEventListener("change", () => { metric = +msel.value; relayout(); if (selected >= 0) select(selected); });
  let timer = 0;
  const refilterSoon = () => { clearTimeout(timer); timer = setTimeout(applyFilters, 150); };
  $("include").addEventListener("input", refilterSoon);
  $("exclude").addEventListener("input", refilterSoon);
  $("reset").addEventListener("click", () => { zoom = 0; draw(); });
  const notes = $("notes");
  for (const n of D.notes || []) notes.appendChild(el("div", "", "note: " + n));
  if (D.devices && D.devices.length) notes.appendChild(el("div", "", "devices: " + D.devices.join("; ")));
  window.addEventListener("hashchange", () => route());
  window.addEventListener("resize", () => { if (!$("tree-view").hidden) draw(); });
  kernelTable();
  if (!M.length) $("legend").textContent = "the profile has no metrics to show";
  width = refilter(rawWidth(widthMetric()));
  for (let i = 0; i < N; i++) kids[i].sort((x, y) => width[y] - width[x]);
  const sorted = performance.now();
  route();
  // for tests and scripts: where a frame is drawn, and the time the page became interactive
  window.kprofReport = {
    frameRect(i) {
      for (const row of rects) for (const r of row) if (r.i === i) {
        const b = canvas.getBoundingClientRect();
        return { x: b.left + r.x, y: b.top + r.row * ROW, w: r.w, h: ROW };
      }
      return null;
    },
    findFrame(name) { for (let i = 0; i < N; i++) if (nameOf(i) === name) return i; return -1; },
    readyAt: performance.now(),
    timings: { scriptStart: started, dataParsed: parsed, decoded, treeBuilt: built, sorted, drawn: performance.now() },
  };
  document.body.dataset.ready = "1";
})();
