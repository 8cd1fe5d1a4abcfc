/* thunder-trace report: provenance panel, tooltips and source <-> op linking.
   Every string from the log is inserted with textContent, never as HTML. */
(function () {  // a live report (thunder-trace report --watch): live.js says when the pages were rebuilt
  "use strict";
  var live = self.thunderTraceLive || {};
  var tag = document.querySelector('script[src$="live.js"]');
  if (!live.live || !tag) return;
  var src = tag.getAttribute("src"), generation = live.generation;
  function span(s) {
    return s < 60 ? s.toFixed(0) + " s" : s < 3600 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
  }
  function now() {  // the index's "what each rank is doing": how long, of now; who went silent
    var ns = Date.now() * 1e6;
    document.querySelectorAll(".live-badge").forEach(function (b) { b.hidden = false; });
    document.querySelectorAll("#now tr[data-last-ns]").forEach(function (row) {
      var since = Number(row.dataset.sinceNs), last = Number(row.dataset.lastNs);
      if (row.dataset.sinceNs) row.querySelector(".now-for").textContent = span(Math.max(0, ns - since) / 1e9);
      var quiet = row.dataset.lastNs ? Math.max(0, ns - last) / 1e9 : 0;
      var silent = quiet > live.silent_s && !row.classList.contains("now-exited");
      var badge = row.querySelector(".now-silent");
      badge.hidden = !silent;
      badge.textContent = silent ? "silent for " + span(quiet) : "";
      row.classList.toggle("now-silent-row", silent);
    });
  }
  function poll() {  // a script, not fetch: pages opened from file:// may load scripts, not read files
    var s = document.createElement("script");
    s.src = src + "?" + Date.now();
    s.onload = function () {
      s.remove();
      if ((self.thunderTraceLive || {}).generation !== generation) { location.reload(); return; }
      now();
      setTimeout(poll, live.interval_ms);
    };
    s.onerror = function () { s.remove(); setTimeout(poll, live.interval_ms); };  // between a rebuild's writes
    document.head.appendChild(s);
  }
  now();
  setTimeout(poll, live.interval_ms);
})();
(function () {
  "use strict";

  function data(id) {
    var el = document.getElementById(id);
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }
  function h(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function each(selector, fn, root) { Array.prototype.forEach.call((root || document).querySelectorAll(selector), fn); }
  function clear(cls) { each("." + cls, function (e) { e.classList.remove(cls); }); }
  function reveal(el, box, again) {  // scroll a box so that el shows in its upper third, the window staying put
    if (!el || !box) return;
    // First el's block of ops (.ck): its place is known from its estimated height, without laying
    // out what the browser skips off screen (forcing that is most of a click's time); el itself in the
    // next frames, its block being on screen and laid out by then, until it stays put (the blocks laid
    // out above it meanwhile, their wrapped lines taller than estimated, move it down).
    var tries = again || 0;
    var target = tries ? el : el.closest(".ck") || el;
    var top = box.scrollTop + target.getBoundingClientRect().top - box.getBoundingClientRect().top - box.clientTop;
    var want = Math.max(0, top - box.clientHeight / 3), moved = Math.abs(box.scrollTop - want) > 2;
    box.scrollTop = want;
    if (tries < 1 || (moved && tries < 6)) requestAnimationFrame(function () { reveal(el, box, tries + 1); });
  }

  // -- highlighting: Thunder's traces and user files
  // The tokens Thunder's printed code and user files are highlighted by, and their classes
  // (report.css): comment, string, decorator, keyword, call. Linear: a string runs to its quote or the end.
  var KEYWORDS = "False|None|True|and|as|assert|async|await|break|class|continue|def|del|elif|else|except|" +
    "finally|for|from|global|if|import|in|is|lambda|nonlocal|not|or|pass|raise|return|try|while|with|yield";
  var TOKEN = new RegExp("(#.*)|((?<![\\w.])[rbuf]{0,2}(?:\"\"\"(?:[^\"\\\\]|\\\\.?|\"(?!\"\"))*(?:\"\"\"|$)|\'\'\'(?:[^'\\\\]|\\\\.?|'(?!''))*(?:\'\'\'|$)|\"(?:[^\"\\\\]|\\\\.?)*(?:\"|$)|'(?:[^'\\\\]|\\\\.?)*(?:'|$)))" +
    "|(^@[\\w.]+)|\\b(" + KEYWORDS + ")\\b|((?<![\\w.])[A-Za-z_][\\w.]*(?=\\())", "g");
  var TOKEN_CLASS = [null, "c1", "s", "nd", "k", "nf"], MAX_LINE = 20000;  // characters: a longer line is shown as plain text
  function highlightInto(parent, text) {  // text nodes and spans: never markup from the log
    if (text.length > MAX_LINE) { parent.append(text); return; }
    var pos = 0, m;
    TOKEN.lastIndex = 0;
    while ((m = TOKEN.exec(text)) !== null) {
      if (!m[0]) { TOKEN.lastIndex++; continue; }
      if (m.index > pos) parent.append(text.slice(pos, m.index));
      var g = 1;
      while (m[g] === undefined) g++;
      parent.append(h("span", TOKEN_CLASS[g], m[0]));
      pos = m.index + m[0].length;
    }
    if (pos < text.length) parent.append(text.slice(pos));
  }
  // User files: highlightInto line by line, and a triple-quoted string (a docstring) coloured on
  // every line it spans. openQuotes: per line, the triple quote open at its start (or null).
  var QUOTES = /(#.*)|("""|''')|("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)/g;
  function closeOf(text, quote, from) {  // the index just past `quote`'s close in text, or -1
    for (var i = from; i < text.length; i++) {
      if (text[i] === "\\") i++;
      else if (text.startsWith(quote, i)) return i + 3;
    }
    return -1;
  }
  function openQuotes(lines) {
    var out = new Array(lines.length), quote = null;
    for (var n = 0; n < lines.length; n++) {
      out[n] = quote;
      var text = typeof lines[n] === "string" ? lines[n] : "", pos = 0, m;
      if (quote) {
        pos = closeOf(text, quote, 0);
        if (pos < 0) continue;
        quote = null;
      }
      QUOTES.lastIndex = pos;
      while ((m = QUOTES.exec(text)) !== null) {
        if (!m[0]) { QUOTES.lastIndex++; continue; }
        if (m[1]) break;  // a comment: the rest of the line
        if (m[2]) {
          var end = closeOf(text, m[2], QUOTES.lastIndex);
          if (end < 0) { quote = m[2]; break; }
          QUOTES.lastIndex = end;
        }
      }
    }
    return out;
  }
  function highlightSource(parent, text, quote) {
    if (quote && text.length <= MAX_LINE) {
      var end = closeOf(text, quote, 0);
      parent.append(h("span", "s", end < 0 ? text : text.slice(0, end)));
      if (end < 0) return;
      text = text.slice(end);
    }
    highlightInto(parent, text);
  }
  // -- user files (source_files.py): each box's lines, from the report's one data file of the file
  // (static/src/<hash>.js, loaded by the page) or from the page's own data (rebuilt from the log);
  // then what this page adds to them (srcmarks: a compile's op counts and times, a graph's marks)
  var SOURCES = window.thunderTraceSrc || {};
  var FX_MARKS = { fallback: ["torch", "ran in a torch fallback piece (not Thunder)"],
    "break": ["break", "Dynamo broke the graph here"] };
  function sourceRow(index, n, line, quote) {  // quote: the triple quote a string opened above is still in
    var row = h("div", "sl"), code = h("code");
    row.id = "L" + index + "-" + n;
    if (typeof line === "string" && line) highlightSource(code, line, quote);
    row.append(h("span", "ln", n), h("span", "cnt"), code);
    return row;
  }
  function sourceRows() {
    each(".srcfile", function (file) {
      var box = file.querySelector(".code.src"), d = null;
      if (!box) return;
      if (box.dataset.src) d = SOURCES[box.dataset.src] || null;
      else d = (function (s) { try { return JSON.parse(s.textContent); } catch (e) { return null; } })(file.querySelector("script.src-data"));
      if (!d || !Array.isArray(d.l)) { box.append(h("p", "muted", "The lines of this file are missing from the report.")); return; }
      var at = null, quotes = null;  // rebuilt: line number -> its place in d.l (lines apart: no strings across them)
      if (Array.isArray(d.n)) { at = {}; d.n.forEach(function (n, i) { at[n] = i; }); }
      else quotes = openQuotes(d.l);
      var out = document.createDocumentFragment(), index = file.dataset.file;
      (box.dataset.show || "").split(",").forEach(function (run, r) {
        var ends = run.split("-"), first = Number(ends[0]), last = Number(ends[1]);
        if (r) out.append(h("div", "gap", "\u22ee"));
        for (var n = first; n > 0 && n <= last; n++) out.append(at ? sourceRow(index, n, d.l[at[n]], null) : sourceRow(index, n, d.l[n - 1], quotes[n - 1]));
      });
      box.append(out);
    });
    var marks = data("srcmarks") || {};
    if (marks.t) each(".srcfile .sl .ln", function (ln) { ln.after(h("span", "tm")); });  // a time column
    Object.keys(marks.c || {}).forEach(function (id) {  // [forward ops, backward ops, fusions] made by the line
      var row = document.getElementById(id), cnt = row && row.querySelector(".cnt");
      if (!cnt) return;
      row.classList.add("has");
      ["c-fw", "c-bw", "c-fu"].forEach(function (cls, i) { if (marks.c[id][i]) cnt.append(h("i", cls, marks.c[id][i])); });
    });
    Object.keys(marks.fx || {}).forEach(function (id) {  // a graph's line that ran in torch, or broke the graph
      var row = document.getElementById(id), cnt = row && row.querySelector(".cnt");
      if (!cnt) return;
      String(marks.fx[id]).split(" ").forEach(function (m) {
        if (!FX_MARKS.hasOwnProperty(m)) return;
        row.classList.add("has", "fx-" + m);
        var flag = h("i", "fx-" + m, FX_MARKS[m][0]);
        flag.title = FX_MARKS[m][1];
        cnt.append(flag);
      });
    });
    if (marks.m) each(".srcfile .sl .ln", function (ln) { ln.after(h("span", "mm")); });  // a memory column
    Object.keys(marks.m || {}).forEach(function (id) {  // [saved for backward, the line's memory figures]
      var row = document.getElementById(id), mm = row && row.querySelector(".mm");
      if (mm) { mm.textContent = marks.m[id][0]; mm.title = marks.m[id][1]; }
    });
    if (marks.m && marks.t) document.body.classList.add("gutter-time");
    each("input.gutter-toggle", function (box) {  // the time / memory toggle (source.html)
      box.addEventListener("change", function () {
        document.body.classList.toggle("gutter-time", box.value === "time");
        document.body.classList.toggle("gutter-mem", box.value === "memory");
      });
    });
    Object.keys(marks.t || {}).forEach(function (id) {  // [time per call, heat, its split, the fusion it is in]
      var row = document.getElementById(id), tm = row && row.querySelector(".tm");
      if (!tm) return;
      var fusion = marks.t[id][3];
      tm.textContent = (fusion ? "\u2282 " : "") + marks.t[id][0];
      tm.title = marks.t[id][2];
      row.dataset.c = marks.t[id][1];
      var cnt = row.querySelector(".cnt");
      if (fusion && cnt) {  // the gutter names the fusion; its hover says the rest ("in TorchCompile1 (with 14 other lines)")
        row.classList.add("has");
        var chip = h("i", "c-in", fusion.replace(/^in (\S+).*$/, "$1"));
        chip.title = fusion;
        cnt.append(chip);
      }
    });
  }
  sourceRows();

  // -- memory timelines (analyze/memory.py _timeline): a trace's bars, drawn from its data, each
  // with its title (op, line, bytes); the peak's bar marked
  function memoryBars() {
    var SVG = "http://www.w3.org/2000/svg", DOT = " \u00b7 ";
    each("figure.memtl", function (fig) {
      var svg = fig.querySelector("svg"), script = fig.querySelector("script.mtl"), d;
      if (!svg || !script) return;
      try { d = JSON.parse(script.textContent); } catch (e) { return; }
      var t = Array.isArray(d.t) ? d.t : [], b = Array.isArray(d.b) ? d.b : [], n = Math.floor(b.length / 7);
      var out = document.createDocumentFragment();
      function text(i) { return typeof t[i] === "string" ? t[i] : "?"; }
      for (var i = 0; i < n; i++) {
        var k = 7 * i, peak = i === d.p, height = 1.2 * Math.min(Math.max(Number(b[k]) || 0, 0), 10000) / 100;
        var rect = document.createElementNS(SVG, "rect"), title = document.createElementNS(SVG, "title");
        rect.setAttribute("class", peak ? "mb pk" : "mb");
        rect.setAttribute("x", (1000 * i / n).toFixed(2));
        rect.setAttribute("y", (120 - height).toFixed(2));
        rect.setAttribute("width", (1000 / n).toFixed(2));
        rect.setAttribute("height", height.toFixed(2));
        title.textContent = text(b[k + 1]) + DOT + text(b[k + 2]) + DOT + "+" + text(b[k + 3]) +
          (b[k + 4] >= 0 ? " \u2212" + text(b[k + 4]) : "") + DOT + text(b[k + 5]) + " live" +
          (peak ? DOT + "the peak" : "") + (b[k + 6] > 1 ? " (largest of " + b[k + 6] + " ops)" : "");
        rect.append(title);
        out.append(rect);
      }
      svg.insertBefore(out, svg.querySelector(".peakline"));
    });
  }
  memoryBars();

  // -- pass lists (html.py pass_rows): a row per trace of the list, drawn from its data
  function passRows() {
    each("table.passes script.passes", function (script) {
      var rows;
      try { rows = JSON.parse(script.textContent); } catch (e) { return; }
      var out = document.createDocumentFragment();
      (Array.isArray(rows) ? rows : []).forEach(function (r) {
        if (!Array.isArray(r)) return;
        var tr = h("tr", r[3] ? "final" : ""), name = h("td"), time = h("td", "r"), changed = h("td", "r");
        var link = h("a", "", r[1]);
        link.href = "#" + r[2];
        name.append(link);
        if (r[3]) name.append(" ", h("span", "badge s-ok", "final"));
        if (r[4] !== null && r[4] !== undefined) name.append(" ", h("span", "muted", "= #" + r[4]));
        if (r[5] !== null && r[5] !== undefined) {
          var track = h("span", "track"), bar = h("span", "bar");
          bar.style.width = (Math.min(Math.max(Number(r[6]) || 0, 0), 100)).toFixed(1) + "%";
          track.append(bar);
          time.append(track, String(r[5]));
        }
        if (Array.isArray(r[8])) changed.append(h("span", "d-add", "+" + r[8][0]), " ", h("span", "d-rem", "\u2212" + r[8][1]),
                                                 " ", h("span", "d-rw", "~" + r[8][2]));
        tr.append(h("td", "muted", "#" + r[0]), name, time, h("td", "r", r[7] === null ? "" : r[7]), changed);
        out.append(tr);
      });
      script.parentNode.append(out);
    });
  }
  passRows();

  // -- pipeline bars (html.py phase_bar): a compile's phases to scale, and every phase in a table
  function phaseBars() {
    each(".phasebox", function (box) {
      var script = box.querySelector("script.phases"), bar = box.querySelector(".timeline.phases"), d;
      var body = box.querySelector("table.phases tbody");
      if (!script || !bar || !body) return;
      try { d = JSON.parse(script.textContent); } catch (e) { return; }
      (Array.isArray(d.s) ? d.s : []).forEach(function (s) {  // [group, name shown, title, width]
        if (!Array.isArray(s)) return;
        var seg = h("span", "seg g-" + s[0]);
        seg.style.flexGrow = String(Math.max(Number(s[3]) || 0, 0));
        seg.title = String(s[2]);
        if (s[1]) seg.append(h("span", "", s[1]));
        bar.append(seg);
      });
      (Array.isArray(d.p) ? d.p : []).forEach(function (p) {  // [depth, group, name, on, start, time, share]
        if (!Array.isArray(p)) return;
        var tr = h("tr", "d" + Math.min(Math.max(Number(p[0]) || 0, 0), 4)), name = h("td");
        name.append(h("span", "key g-" + p[1]), String(p[2]));
        tr.append(name, h("td", "", p[3]), h("td", "", p[4]), h("td", "", p[5]), h("td", "", p[6]));
        body.append(tr);
      });
    });
  }
  phaseBars();

  var table = window.thunderTraceProvs || {};  // a compile's records (output.py: PROVS_SUFFIX)
  var provs = table.provs || {};
  var paths = table.paths || {};  // index -> path; a frame is [path index, line, function, text, user]
  function base(path) { return String(path).split("/").pop(); }
  var pageinfo = data("pageinfo");
  var panel = document.getElementById("panel");
  var tip = document.getElementById("tip");

  // -- the provenance panel ---------------------------------------------------------------
  function plink(id) {
    var info = provs[id];
    var a = h("span", "plink", info ? info.h : "record #" + id);
    a.addEventListener("click", function () { showProv(id); });
    return a;
  }
  function where(frame) {  // a frame [path index, line, function, text, user] as "file.py:12 `text`"
    var at = h("span");
    at.append(h("span", "where", base(paths[frame[0]]) + ":" + frame[1]), " ", h("code", null, frame[3]));
    at.title = paths[frame[0]];
    return at;
  }
  function count(n, what) { return n + " " + what + (n === 1 ? "" : "s"); }
  // A fusion's members by user line, and within a line by module, each once with how many of the
  // fused ops (or, without the log's list of them, how many records) it has: [line groups, n lines, n modules].
  function fusionGroups(info, region) {
    var lines = {}, order = [], modules = {};
    var add = function (id, ops) {
      var m = provs[id];
      if (!m) return;
      var key = m.f ? m.f[0] + ":" + m.f[1] : "";
      var line = lines[key];
      if (!line) { line = lines[key] = { frame: m.f, mods: {}, order: [], ops: 0, ids: {} }; order.push(key); }
      var mk = m.m === null || m.m === undefined ? "\u0000" : m.m;
      var mod = line.mods[mk];
      if (!mod) { mod = line.mods[mk] = { name: m.m, type: m.mt, ops: 0, ids: [], kinds: {} }; line.order.push(mk); }
      if (mod.ids.indexOf(id) < 0) mod.ids.push(id);
      mod.kinds[m.k] = true;
      mod.ops += ops; line.ops += ops; line.ids[id] = true;
      modules[mk] = true;
    };
    if (region) region.forEach(function (r) { if (r[1] !== null && r[1] !== undefined) add(r[1], 1); });
    else (info.mem || []).forEach(function (m) { add(m, 1); });
    var n = region ? region.length : (info.mem || []).length;
    return { lines: order.map(function (k) { return lines[k]; }), modules: Object.keys(modules).length, byOps: !!region,
      summary: count(n, region ? "op" : "record") + " from " + count(order.length, "user line") + " in " +
        count(Object.keys(modules).length, "module") };
  }
  function fusionSummary(info, region) { return "fusion of " + fusionGroups(info, region).summary; }
  function showFusion(info, region, row) {  // the panel's part for a fusion: its fused ops, its members grouped
    var groups = fusionGroups(info, region);
    var what = groups.byOps ? "op" : "record";
    row("fuses", groups.summary);
    var box = h("div", "fusion");
    box.append(h("h3", null, "by user line and module"));
    var ul = h("ul", "fgroups");
    groups.lines.forEach(function (line) {
      var li = h("li", "fline");
      var head = h("div", "fl-head");
      head.append(h("span", "fcount", "\u00d7" + line.ops));
      if (line.frame) {
        head.append(h("span", "where", base(paths[line.frame[0]]) + ":" + line.frame[1]), h("code", null, line.frame[3]));
        head.title = paths[line.frame[0]] + ":" + line.frame[1] + ": " + line.frame[3] + " (" + count(line.ops, what) + ")";
      } else head.append(h("span", "muted", "(no user line)"));
      li.append(head);
      var mods = h("ul", "fmods");
      line.order.forEach(function (mk) {
        var mod = line.mods[mk], m = h("li", "fmod");
        var name = plink(mod.ids[0]);
        name.textContent = (mod.name === null || mod.name === undefined ? "(no module)" : mod.name || "<root>") + (mod.type ? " (" + mod.type + ")" : "");
        m.append(h("span", "fcount", "\u00d7" + mod.ops), " ", name, " ", h("span", "muted small", Object.keys(mod.kinds).join(", ")));
        m.title = count(mod.ops, what) + (groups.byOps ? " of " + count(mod.ids.length, "record") : "");
        mods.append(m);
      });
      li.append(mods);
      ul.append(li);
    });
    box.append(ul);
    if (region) {
      box.append(h("h3", null, "fused ops, in order (" + region.length + ")"));
      var ol = h("ol", "fops code");
      region.forEach(function (r) {
        var li = h("li", "fop"), code = h("code");
        highlightInto(code, r[0]);
        li.append(code);
        var m = r[1] === null || r[1] === undefined ? null : provs[r[1]];
        if (m && m.f) li.append(" ", h("span", "where muted", base(paths[m.f[0]]) + ":" + m.f[1]));
        if (m) { li.title = m.h; li.addEventListener("click", function () { showProv(r[1]); }); }
        ol.append(li);
      });
      box.append(ol);
    } else {
      box.append(h("p", "muted small", "The log does not list this fusion's ops (a log of schema 1.5 or older): its records are grouped above."));
    }
    return box;
  }
  function showProv(id, op) {  // a record in the panel; `op`: the op clicked (its time, a fusion's ops)
    if (!panel) return;
    var info = provs[id];
    panel.classList.remove("idle");
    panel.replaceChildren();
    if (!info) { panel.append(h("p", "muted", "No provenance record " + id + " in the log.")); return; }
    var fusion = info.k === "fusion";
    if (fusion && !op) op = document.querySelector('pre.code .op[data-p="' + id + '"]');  // from the Fusions table
    var region = fusion && op && op._region ? op._region : null;
    var symbol = fusion && op ? (op.textContent.match(/(\w+)\(/) || [])[1] : null;  // `outs = TorchCompile0(...)`
    var title = h("h3", null, fusion ? "fusion" + (symbol ? " " + symbol : "") : info.h);
    if (fusion) title.title = info.h;
    panel.append(title);
    var dl = h("dl");
    function row(key, value) {
      if (value === undefined || value === null || value === "") return;
      dl.append(h("dt", null, key));
      var dd = h("dd");
      if (value instanceof Node) dd.append(value); else dd.textContent = String(value);
      dl.append(dd);
    }
    row("record", "#" + info.id + " · " + info.k);
    if (op && op.dataset.t) {  // a profiled op (analyze/cost.py: op_times)
      var time = h("span", "optime");
      time.append(h("b", "h" + (op.dataset.c || 0), op.dataset.t), " per call");
      if (op.dataset.s) time.append(h("div", "small", op.dataset.s));
      row("time", time);
    }
    if (info.m !== null && info.m !== undefined) row("module", (info.m || "<root>") + (info.mt ? " (" + info.mt + ")" : ""));
    if (info.f) row("user line", where(info.f));
    if (info.ml) row("module line", where(info.ml));
    row("lineage", info.lin);
    if (info.r) row("role", h("span", "chip role" + info.rc, info.r));
    row("scope", info.sp);
    if (info.d !== null && info.d !== undefined) row("derived from", plink(info.d));
    var fused = fusion ? showFusion(info, region, row) : null;
    if (!fusion && info.mem && info.mem.length) {
      var box = h("div");
      info.mem.forEach(function (m) { box.append(plink(m)); });
      row("fused (" + info.mem.length + ")", box);
    }
    panel.append(dl);
    if (fused) panel.append(fused);
    if (info.st && info.st.length) {
      panel.append(h("h3", null, "stack, innermost first"));
      var ol = h("ol", "stack");
      info.st.forEach(function (f) {
        var li = h("li", f[4] ? "frame" : "frame lib");
        li.append(h("span", "where", base(paths[f[0]]) + ":" + f[1]), " ", h("span", "fn", f[2]), " ", h("code", null, f[3]));
        li.title = paths[f[0]];
        ol.append(li);
      });
      panel.append(ol);
    }
    if (pageinfo && pageinfo.source) {
      var a = h("a", null, "show in the source view →");
      a.href = pageinfo.source + "#p" + id;
      panel.append(a);
    }
  }

  // -- tooltips: the record's one-line header -------------------------------------------------
  document.addEventListener("mouseover", function (ev) {
    var op = ev.target.closest && ev.target.closest(".op[data-p]");
    if (!tip) return;
    if (!op) { tip.hidden = true; return; }
    var info = provs[op.dataset.p];
    var text = !info ? "record #" + op.dataset.p : info.k === "fusion" ? fusionSummary(info, op._region) + " (click for them)" : info.h;
    tip.textContent = text + (op.dataset.t ? " \u00b7 " + op.dataset.t + " per call" : "");
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (ev) {
    if (tip && !tip.hidden) {
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 540) + "px";
      tip.style.top = (ev.clientY + 16) + "px";
    }
  });

  each(".prov-link", function (a) {
    a.addEventListener("click", function (ev) { ev.preventDefault(); showProv(a.dataset.p); });
  });
  each(".toggle-ph", function (box) {
    var apply = function () { document.body.classList.toggle("hide-ph", !box.checked); };
    box.addEventListener("change", apply);
    apply();
  });

  // -- compile page -------------------------------------------------------------------------
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;  // a trace (details), or an op in one (a desync's first differing op)
    clear("tgt");  // :target's look, for an op given its id after the page loaded
    if (target.classList.contains("op")) target.classList.add("tgt");
    for (var d = target.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    target.scrollIntoView(target.tagName === "DETAILS" ? true : { block: "center" });
  }
  // -- traces rendered from data (trace_data.py): a page's distinct lines, then each trace's data ----
  var lineTable = null;
  function traceLines() {
    if (lineTable) return lineTable;
    lineTable = [];
    each("script.tl", function (s) {
      var more = [];
      try { more = JSON.parse(s.textContent); } catch (e) { /* a broken page: lines show empty */ }
      for (var i = 0; i < more.length; i++) lineTable.push(typeof more[i] === "string" ? more[i] : "");
    });
    return lineTable;
  }
  // Thunder's comments for the source line of the ops below them (annotation.THUNDER_SOURCE_COMMENT)
  var THUNDER_SOURCE_COMMENT = /^\s*# .+:\d+: \t/;
  var CHUNK = 64;  // ops per block, which the browser lays out only near the screen (report.css: .ck)
  var KIND_CLASS = { op: "qo", decomposition: "qd", backward: "qb", recompute: "qr", fusion: "qf",
    bookkeeping: "qk", pass: "qp", scope: "qs" };
  function isThunderComment(line) { return line.indexOf(": \t") >= 0 && THUNDER_SOURCE_COMMENT.test(line); }
  function renderTrace(box) {  // a trace's data (in box: a details or a pane) as code: spans and text nodes
    var pre = box.querySelector("pre.code.lazy"), script = box.querySelector("script.td");
    if (!pre || !script) return null;
    var d;
    try { d = JSON.parse(script.textContent); } catch (e) { return null; }
    var table = traceLines(), lines = [], r;
    for (r = 0; r < d.l.length; r++) lines.push(table[d.l[r]] || "");
    var times = {};  // a profiled trace: op index -> [heat, time per call, spread across calls]
    for (r = 0; d.c && r + 2 < d.c.length; r += 3) times[d.c[r]] = [d.c[r + 1], d.c[r + 2], ""];
    for (r = 0; Array.isArray(d.s) && r + 1 < d.s.length; r += 2) if (times[d.s[r]]) times[d.s[r]][2] = String(d.s[r + 1]);
    var regions = {};  // a fusion op's index -> its fused ops, in order: [[text, record id], ...]
    for (r = 0; Array.isArray(d.f) && r + 2 < d.f.length; r += 3) (regions[d.f[r]] = regions[d.f[r]] || []).push([String(d.f[r + 1]), d.f[r + 2]]);
    pre.classList.toggle("timed", !!(d.c && d.c.length));  // a gutter of op times at the left (report.css)
    var out = document.createDocumentFragment(), pos = 0, previous = null;
    var ck = null, shown = [0, 0, 0];  // the current block of CHUNK ops: code lines, headers, Thunder's comments
    var sized = function () { ck.setAttribute("style", "--n:" + shown[0] + ";--h:" + shown[1] + ";--t:" + shown[2]); };
    var block = function () {
      if (ck) sized();
      ck = h("span", "ck");
      out.append(ck);
      shown = [0, 0, 0];
    };
    var between = function (start, stop) {  // the lines between ops: the signature, comments, blank lines
      for (var i = start; i < stop; i++) {
        var text = lines[i];
        if (isThunderComment(text)) { var s = h("span", "tsc"); highlightInto(s, text); ck.append(s); shown[2]++; }
        // Thunder prints a blank line before each of its source comments: with the comments hidden
        // (or shown in place, as a block of their own), it would leave a blank line between most ops.
        else if (!text.trim() && i + 1 < lines.length && isThunderComment(lines[i + 1])) continue;
        else {
          if (text) { var t = h("span", "tx"); highlightInto(t, text); ck.append(t); }
          ck.append("\n");
          shown[0]++;
        }
      }
    };
    block();
    for (var j = 0, i = 0; j + 2 < d.o.length; j += 3, i++) {
      var line = d.o[j], n = d.o[j + 1], p = d.o[j + 2];
      if (i && !(i % CHUNK)) block();
      if (line > pos) between(pos, line);
      var span = h("span", "op"), info = p === null ? null : provs[p];
      if (p !== null) span.dataset.p = p;
      if (times[i]) {
        span.dataset.c = times[i][0];
        span.dataset.t = times[i][1];
        if (times[i][2]) span.dataset.s = times[i][2];
      }
      if (regions[i]) span._region = regions[i];
      if (info) {
        span.className = "op " + (KIND_CLASS[info.k] || "qx") + (info.rc !== null && info.rc !== undefined ? " role" + info.rc : "");
        var header = info.k === "fusion" ? fusionSummary(info, regions[i]) : info.h;  // not its wall of lines and modules
        if (info.k !== "bookkeeping" && header !== previous) {
          var first = lines[line];
          ck.append(h("span", "ph", first.slice(0, first.length - first.replace(/^\s+/, "").length) + "# \u2500\u2500 " + header));
          previous = header;
          shown[1]++;
        }
      }
      if (n === 1) highlightInto(span, lines[line]);
      else {  // each line wraps on its own (report.css: .ol)
        span.classList.add("ml");
        for (var x = 0; x < n; x++) {
          if (x) span.append("\n");
          var ol = h("span", "ol");
          highlightInto(ol, lines[line + x]);
          span.append(ol);
        }
      }
      ck.append(span, "\n");
      shown[0] += n;
      pos = line + n;
    }
    between(pos, lines.length);
    sized();
    pre.replaceChildren(out);
    pre.classList.remove("lazy");
    if (find) find.refresh();
    return pre;
  }
  document.addEventListener("toggle", function (ev) {
    var d = ev.target;
    if (d.open && d.classList && d.classList.contains("trace")) renderTrace(d);
  }, true);

  // -- find: ops by name, tensor, user line, module, role ---------------------------------------
  var find = (function () {
    var box = document.getElementById("find");
    if (!box) return null;
    var count = document.getElementById("find-count"), matches = [], at = -1;
    var haystack = function (op) {
      if (op._hay === undefined) {
        var info = provs[op.dataset.p], parts = [op.textContent];
        if (info) {
          parts.push(info.h, info.m || "", info.r || "");
          if (info.f) parts.push(base(paths[info.f[0]]) + ":" + info.f[1], info.f[3]);
        }
        op._hay = parts.join("\n").toLowerCase();
      }
      return op._hay;
    };
    var test = function (query) {  // a word (a tensor, an op): whole words; anything else: a substring
      if (/^\w+$/.test(query)) {
        var re = new RegExp("(^|\\W)" + query + "($|\\W)");
        return function (text) { return re.test(text); };
      }
      return function (text) { return text.indexOf(query) >= 0; };
    };
    var show = function () {
      clear("found-cur");
      if (at >= 0 && matches[at]) {
        matches[at].classList.add("found-cur");
        matches[at].scrollIntoView({ block: "center" });
      }
      var shown = matches.length ? (at + 1) + " of " + matches.length : (box.value.trim() ? "no match" : "");
      count.textContent = shown + (box.value.trim() && document.querySelector("pre.code.lazy") ? " in open traces" : "");
    };
    var search = function (keep) {
      var query = box.value.trim().toLowerCase(), current = matches[at];
      matches.forEach(function (op) { op.classList.remove("found"); });
      matches = [];
      if (query) {
        var ok = test(query);
        each("pre.code .op", function (op) { if (ok(haystack(op))) { op.classList.add("found"); matches.push(op); } });
      }
      at = keep && current ? Math.max(0, matches.indexOf(current)) : (matches.length ? 0 : -1);
      show();
    };
    var step = function (by) {
      if (!matches.length) return;
      at = (at + by + matches.length) % matches.length;
      show();
    };
    box.addEventListener("input", function () { search(false); });
    box.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter") { ev.preventDefault(); step(ev.shiftKey ? -1 : 1); }
    });
    box.closest(".find").addEventListener("keydown", function (ev) {  // the box or its buttons
      if (ev.key === "Escape") { box.value = ""; search(false); ev.target.blur(); }
    });
    each(".find button", function (b) { b.addEventListener("click", function () { step(Number(b.dataset.step)); }); });
    document.addEventListener("keydown", function (ev) {
      var t = ev.target;
      if (ev.key === "/" && !(t.closest && t.closest("input, textarea, select"))) { ev.preventDefault(); box.focus(); box.select(); }
    });
    return { refresh: function () { if (box.value.trim()) search(true); } };
  })();

  // A program torch wrote to reproduce a compile (fx_graph_runnable): its button copies it whole.
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest("button[data-copy]");
    var pre = button && button.parentNode.querySelector("pre");
    if (!pre || !navigator.clipboard) return;
    navigator.clipboard.writeText(pre.textContent).then(function () { button.textContent = "copied"; },
      function () { button.textContent = "copy failed (select the text)"; });
  });

  if (document.body.classList.contains("page-compile")) {
    var last = {};
    each("details.trace:not(.repeat)", function (d) { last[d.dataset.list] = d; });
    var desyncOps = data("desync-ops") || [];  // [list, op index]: the first differing op of a desync (desync.py)
    Object.keys(last).forEach(function (k) {
      if (k !== "computation" && k !== "backward") return;
      last[k].open = true;  // the final traces: open and rendered now (so that a link to an op finds it)
      var pre = renderTrace(last[k]);
      desyncOps.forEach(function (at) {
        var op = pre && at[0] === k && pre.querySelectorAll(".op")[at[1]];
        if (op) op.id = "op-" + k + "-" + at[1];
      });
    });
    window.addEventListener("hashchange", openTarget);
    openTarget();
    document.addEventListener("click", function (ev) {
      var op = ev.target.closest(".op");
      if (!op) return;
      clear("sel"); clear("hl2");
      op.classList.add("sel");
      var pre = op.closest("pre");
      if (op.dataset.p) {
        each('.op[data-p="' + op.dataset.p + '"]', function (o) { if (o !== op) o.classList.add("hl2"); }, pre);
        showProv(op.dataset.p, op);
      }
    });
  }

  // -- source view --------------------------------------------------------------------------
  if (document.body.classList.contains("page-source")) {
    each("section.pane-box", renderTrace);  // the final traces
    var keys = data("srckeys") || {};
    var byLine = {};  // "file:line" -> {d: ops made by the line, s: ops made inside calls on it}
    var add = function (key, op, how) {
      var k = key[0] + ":" + key[1];
      (byLine[k] = byLine[k] || { d: [], s: [] })[how].push(op);
    };
    each("pre.pane .op[data-p]", function (op) {
      var info = provs[op.dataset.p];
      if (!info || info.k === "bookkeeping") return;
      if (info.k === "fusion") {
        (info.mem || []).forEach(function (m) { if (keys[m]) add(keys[m][0], op, "d"); });
      } else if (keys[op.dataset.p]) {
        keys[op.dataset.p].forEach(function (key, i) { add(key, op, i === 0 ? "d" : "s"); });
      }
    });
    var status = document.getElementById("status");
    var paneCounts = function (ops) {
      var counts = {};
      ops.forEach(function (o) {
        var pane = o.closest("pre").dataset.pane;
        var kind = o.classList.contains("qf") ? "fusion" : pane;
        counts[kind] = (counts[kind] || 0) + 1;
      });
      return counts;
    };
    var lineKey = function (line) { return line.id.slice(1).replace("-", ":"); };  // "L0-12" -> "0:12"
    var selectLine = function (line) {
      clear("sel"); clear("sel2"); clear("hl"); clear("hl2");
      line.classList.add("sel");
      var entry = byLine[lineKey(line)] || { d: [], s: [] };
      var seen = new Set(entry.d), direct = Array.from(seen);  // a fusion is listed once per member line
      var inside = entry.s.filter(function (o) { return !seen.has(o) && (seen.add(o), true); });
      direct.forEach(function (o) { o.classList.add("hl"); });
      inside.forEach(function (o) { o.classList.add("hl2"); });
      each("pre.pane", function (pre) {
        reveal(pre.querySelector(".op.hl") || pre.querySelector(".op.hl2"), pre);
        var n = pre.querySelectorAll(".op.hl").length;
        var label = document.querySelector('.pane-count[data-pane="' + pre.dataset.pane + '"]');
        if (label) label.textContent = n ? n + " highlighted" : "";
      });
      var c = paneCounts(direct);
      var code = line.querySelector("code");
      status.replaceChildren(
        h("b", null, line.closest(".srcfile").querySelector("h3").firstChild.textContent.trim() + ":" +
          lineKey(line).split(":")[1]), " ", h("code", null, code ? code.textContent.trim() : ""),
        " → " + (c.forward || 0) + " forward ops, " + (c.backward || 0) + " backward ops, " +
        (c.fusion || 0) + " fusions" + (inside.length ? "; " + inside.length + " more inside calls made on this line" : ""));
    };
    var selectOp = function (op) {
      clear("sel"); clear("sel2"); clear("hl"); clear("hl2");
      op.classList.add("sel");
      var p = op.dataset.p;
      if (!p) return;
      showProv(p, op);
      var info = provs[p];
      var lines = [];
      if (info && info.k === "fusion") {
        (info.mem || []).forEach(function (m) { if (keys[m]) lines.push([keys[m][0], "sel"]); });
      } else if (keys[p]) {
        keys[p].forEach(function (key, i) { lines.push([key, i === 0 ? "sel" : "sel2"]); });
      }
      var first = null;
      lines.forEach(function (pair) {
        var el = document.getElementById("L" + pair[0][0] + "-" + pair[0][1]);
        if (el) { el.classList.add(pair[1]); if (!first && pair[1] === "sel") first = el; }
      });
      if (first) reveal(first, first.closest(".code.src"));
      status.replaceChildren(h("b", null, !info ? "record #" + p : info.k === "fusion" ? fusionSummary(info, op._region) : info.h),
        first ? "" : " (no user line in this compile's source files)");
    };
    document.addEventListener("click", function (ev) {
      var line = ev.target.closest(".sl");
      if (line) { selectLine(line); return; }
      var op = ev.target.closest("pre.pane .op");
      if (op) selectOp(op);
    });
    var hash = location.hash.slice(1);
    if (/^p\d+$/.test(hash)) {
      var op = document.querySelector('pre.pane .op[data-p="' + hash.slice(1) + '"]');
      if (op) { selectOp(op); reveal(op, op.closest("pre")); }
    } else if (/^L\d+-\d+$/.test(hash)) {
      var line = document.getElementById(hash);
      if (line) { selectLine(line); line.scrollIntoView(); }  // below the sticky bars (scroll-margin-top)
    } else {  // each file at its hottest line (data-open: source_view.py), not at its license header
      each("section.srcfile[data-open]", function (f) {
        var at = document.getElementById("L" + f.dataset.file + "-" + f.dataset.open);
        if (at) reveal(at, at.closest(".code.src"));
      });
    }
    if (panel) panel.classList.add("idle");
  }
})();
