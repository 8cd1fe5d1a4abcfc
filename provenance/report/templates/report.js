/* thunder-trace report: provenance panel, tooltips and source <-> op linking.
   Every string from the log is inserted with textContent, never as HTML. */
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
  function reveal(el, box) {  // scroll a box (position: relative) so that el shows in its upper third
    if (el && box) box.scrollTop = Math.max(0, el.offsetTop - box.clientHeight / 3);
  }

  var table = data("provs") || {};
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
  function showProv(id) {
    if (!panel) return;
    var info = provs[id];
    panel.classList.remove("idle");
    panel.replaceChildren();
    if (!info) { panel.append(h("p", "muted", "No provenance record " + id + " in the log.")); return; }
    panel.append(h("h3", null, info.h));
    var dl = h("dl");
    function row(key, value) {
      if (value === undefined || value === null || value === "") return;
      dl.append(h("dt", null, key));
      var dd = h("dd");
      if (value instanceof Node) dd.append(value); else dd.textContent = String(value);
      dl.append(dd);
    }
    row("record", "#" + info.id + " · " + info.k);
    if (info.m !== null && info.m !== undefined) row("module", (info.m || "<root>") + (info.mt ? " (" + info.mt + ")" : ""));
    if (info.f) {
      var where = h("span");
      where.append(h("span", "where", base(paths[info.f[0]]) + ":" + info.f[1]), " ", h("code", null, info.f[3]));
      where.title = paths[info.f[0]];
      row("user line", where);
    }
    row("lineage", info.lin);
    if (info.r) row("role", h("span", "chip role" + info.rc, info.r));
    row("scope", info.sp);
    if (info.d !== null && info.d !== undefined) row("derived from", plink(info.d));
    if (info.mem && info.mem.length) {
      var box = h("div");
      info.mem.forEach(function (m) { box.append(plink(m)); });
      row("fused (" + info.mem.length + ")", box);
    }
    panel.append(dl);
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
    tip.textContent = (info ? info.h : "record #" + op.dataset.p) + (op.dataset.t ? " \u00b7 " + op.dataset.t + " per call" : "");
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
    if (target && target.tagName === "DETAILS") { target.open = true; target.scrollIntoView(); }
  }
  if (document.body.classList.contains("page-compile")) {
    var last = {};
    each("details.trace:not(.repeat)", function (d) { last[d.dataset.list] = d; });
    Object.keys(last).forEach(function (k) { if (k === "computation" || k === "backward") last[k].open = true; });
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
        showProv(op.dataset.p);
      }
    });
  }

  // -- source view --------------------------------------------------------------------------
  if (document.body.classList.contains("page-source")) {
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
      var direct = entry.d.filter(function (o, i, a) { return a.indexOf(o) === i; });
      var inside = entry.s.filter(function (o) { return direct.indexOf(o) < 0; });
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
      showProv(p);
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
      status.replaceChildren(h("b", null, info ? info.h : "record #" + p),
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
      if (line) selectLine(line);
    }
    if (panel) panel.classList.add("idle");
  }
})();
