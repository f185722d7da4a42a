// A small Markdown renderer that builds DOM nodes: every piece of the model's text becomes a text node
// (textContent), never markup, so HTML a model writes (<script>, <img onerror=...>) shows as text and
// never runs. Links are kept only for http(s) and mailto addresses.
//
// Covers what chat models write: paragraphs, headings, fenced code blocks, lists, block quotes, rules,
// tables, and inline code, bold, italic, strikethrough and links. Unclosed constructs (a fence still
// streaming) render as far as they go.

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w#+.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_DIVIDER = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;
const SAFE_URL = /^(https?:\/\/|mailto:)/i;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  renderBlocks(text.replace(/\r\n?/g, "\n").split("\n"), fragment);
  return fragment;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let match;
    if ((match = FENCE.exec(line))) {
      const fence = match[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++; // the closing fence (or the end of a block still streaming)
      parent.append(codeBlock(body.join("\n"), match[2]));
    } else if ((match = HEADING.exec(line))) {
      const heading = el(`h${Math.min(match[1].length + 2, 6)}`); // the page owns h1 and h2
      renderInline(match[2], heading);
      parent.append(heading);
      i++;
    } else if (RULE.test(line)) {
      parent.append(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && (match = QUOTE.exec(lines[i]))) { quoted.push(match[1]); i++; }
      const quote = el("blockquote");
      renderBlocks(quoted, quote);
      parent.append(quote);
    } else if (LIST_ITEM.test(line)) {
      i = renderList(lines, i, parent);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_DIVIDER.test(lines[i + 1])) {
      i = renderTable(lines, i, parent);
    } else {
      const paragraph = el("p");
      const start = i;
      while (i < lines.length && lines[i].trim() && (i === start || !startsBlock(lines[i]))) {
        if (i > start) paragraph.append(el("br"));
        renderInline(lines[i].trim(), paragraph);
        i++;
      }
      parent.append(paragraph);
    }
  }
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || LIST_ITEM.test(line);
}

function codeBlock(code, language) {
  const figure = el("div", "code-block");
  const head = el("div", "code-head");
  const label = el("span");
  label.textContent = language || "text";
  const copy = el("button", "copy");
  copy.type = "button";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", `Copy the ${language || "text"} code`);
  copy.addEventListener("click", () => copyText(code, copy));
  head.append(label, copy);
  const pre = el("pre");
  const codeNode = el("code");
  if (/^[\w+-]+$/.test(language)) codeNode.className = `language-${language}`;
  codeNode.textContent = code;
  pre.append(codeNode);
  figure.append(head, pre);
  return figure;
}

export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed"; // no clipboard outside a secure context
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

function renderList(lines, i, parent) {
  const first = LIST_ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const list = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) list.start = parseInt(first[2], 10);
  const baseIndent = first[1].length;
  let item = null;
  let body = [];
  const flush = () => {
    if (item) { renderItem(body, item); list.append(item); }
  };
  while (i < lines.length) {
    const line = lines[i];
    const match = LIST_ITEM.exec(line);
    if (match && match[1].length <= baseIndent + 1 && /\d/.test(match[2]) === ordered) {
      flush();
      item = el("li");
      body = [match[3]];
    } else if (line.trim() && (/^\s/.test(line) || !startsBlock(line)) && !(match && match[1].length <= baseIndent)) {
      body.push(line.replace(/^\s{1,4}/, "")); // a nested list or a continuation line
    } else if (!line.trim() && i + 1 < lines.length && /^\s+\S/.test(lines[i + 1])) {
      body.push("");
    } else {
      break;
    }
    i++;
  }
  flush();
  parent.append(list);
  return i;
}

function renderItem(body, item) {
  if (body.length === 1 || !body.slice(1).some((line) => startsBlock(line))) {
    body.forEach((line, index) => {
      if (index) item.append(el("br"));
      renderInline(line.trim(), item);
    });
  } else {
    renderBlocks(body, item);
  }
}

function renderTable(lines, i, parent) {
  const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => cell.trim());
  const wrap = el("div", "table-wrap");
  const table = el("table");
  const headRow = el("tr");
  for (const cell of cells(lines[i])) {
    const th = el("th");
    renderInline(cell, th);
    headRow.append(th);
  }
  const thead = el("thead");
  thead.append(headRow);
  const tbody = el("tbody");
  i += 2;
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
    const row = el("tr");
    for (const cell of cells(lines[i])) {
      const td = el("td");
      renderInline(cell, td);
      row.append(td);
    }
    tbody.append(row);
    i++;
  }
  table.append(thead, tbody);
  wrap.append(table);
  parent.append(wrap);
  return i;
}

// Inline spans, the earliest first: code (whose content is literal), links, bold, strikethrough, italic.
// Underscores count only at word edges, so snake_case and __dunder__ names inside words stay as written.
const INLINE = /(`+)([\s\S]+?)\1|\[([^\]\n]+)\]\(([^)\s]+)\)|\*\*(.+?)\*\*|(?<![\w])__(?!\s)(.+?)__(?![\w])|~~(.+?)~~|\*(?!\s)(.+?)\*|(?<![\w])_(?!\s)(.+?)_(?![\w])/;

export function renderInline(text, parent) {
  let rest = text;
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) { parent.append(document.createTextNode(rest)); return; }
    if (match.index) parent.append(document.createTextNode(rest.slice(0, match.index)));
    const [whole, , code, linkText, url, bold, bold2, struck, italic, italic2] = match;
    if (code !== undefined) {
      const node = el("code");
      node.textContent = code.trim() || code;
      parent.append(node);
    } else if (linkText !== undefined) {
      if (SAFE_URL.test(url)) {
        const link = el("a");
        link.href = url;
        link.target = "_blank";
        link.rel = "noopener noreferrer nofollow";
        renderInline(linkText, link);
        parent.append(link);
      } else {
        parent.append(document.createTextNode(whole)); // javascript: and the like stay text
      }
    } else {
      const node = el(bold !== undefined || bold2 !== undefined ? "strong" : struck !== undefined ? "del" : "em");
      renderInline(bold ?? bold2 ?? struck ?? italic ?? italic2, node);
      parent.append(node);
    }
    rest = rest.slice(match.index + whole.length);
  }
}
