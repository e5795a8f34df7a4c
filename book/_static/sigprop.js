/* sigprop book: a table wider than the content column says so.
 *
 * Every table of a page sits in a box that scrolls sideways (book/_static/sigprop.css; a table in no
 * such box is wrapped in one here). When the table is wider than its box, the box gets the class
 * `sp-overflows` (edge shadows, a sticky first column when that column is narrow) and a line above it,
 * `.sp-scroll-hint`, says that the table scrolls; `sp-scrolled-end` marks a box scrolled to its right
 * edge. Widths change after MathJax typesets and when the window is resized: a ResizeObserver re-measures.
 * tests/test_book_browser.py checks, on every page, that no table is wider than its box without the hint.
 * Loaded on every page through html_js_files in _config.yml; nothing is fetched from the network.
 */
(function () {
  "use strict";

  var HINT = "Wider than the page: scroll the table sideways \u2192";

  function scrolls(el) {
    var x = getComputedStyle(el).overflowX;
    return x === "auto" || x === "scroll";
  }

  function boxOf(table, article) {
    for (var el = table.parentElement; el && el !== article; el = el.parentElement) {
      if (scrolls(el)) return el;
    }
    var wrap = document.createElement("div");
    wrap.className = "sp-table-scroll";
    table.parentNode.insertBefore(wrap, table);
    wrap.appendChild(table);
    return wrap;
  }

  function atEnd(box) {
    box.classList.toggle("sp-scrolled-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
  }

  function measure(box) {
    var over = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("sp-overflows", over);
    var hint = box.previousElementSibling;
    var has = hint && hint.classList.contains("sp-scroll-hint");
    if (over && !has) {
      hint = document.createElement("div");
      hint.className = "sp-scroll-hint";
      hint.setAttribute("aria-hidden", "true");
      hint.textContent = HINT;
      box.parentNode.insertBefore(hint, box);
      has = true;
    }
    if (has) hint.hidden = !over;
    var first = box.querySelector("tr > :first-child");
    box.classList.toggle("sp-sticky-first", over && !!first && first.offsetWidth < 0.35 * box.clientWidth);
    atEnd(box);
  }

  function init() {
    var article = document.querySelector(".bd-article");
    if (!article) return;
    var boxes = [];
    article.querySelectorAll("table").forEach(function (table) {
      if (table.closest("mjx-container")) return;
      var box = boxOf(table, article);
      if (boxes.indexOf(box) < 0) boxes.push(box);
    });
    boxes.forEach(function (box) {
      box.classList.add("sp-scroll-box");
      measure(box);
      box.addEventListener("scroll", function () { atEnd(box); }, {passive: true});
      if (window.ResizeObserver) {
        var pending = false;  // measure once per frame, after layout (no ResizeObserver loop)
        var observer = new ResizeObserver(function () {
          if (pending) return;
          pending = true;
          requestAnimationFrame(function () { pending = false; measure(box); });
        });
        observer.observe(box);
        var table = box.querySelector("table");
        if (table) observer.observe(table);
      }
    });
    if (!window.ResizeObserver) window.addEventListener("resize", function () { boxes.forEach(measure); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
