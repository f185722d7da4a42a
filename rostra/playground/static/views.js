// How a turn is drawn: the user's message, and the answer built from the Responses stream's events
// (or, for a stored conversation, from its items). One part per output item: text (Markdown), reasoning
// (collapsible), a function call (arguments as they stream, then a box for its output), an MCP call,
// tool listing or approval request. The answer's footer has the usage, time to first token and speed.

import { renderMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text; // still streaming, or not JSON: shown as it came
  }
}

export class UserMessage {
  constructor(text, imageUrls = []) {
    this.root = el("article", "message user");
    this.root.setAttribute("aria-label", "You");
    if (imageUrls.length) {
      const images = el("div", "message-images");
      imageUrls.forEach((url, index) => {
        const img = el("img");
        img.src = url; // a data: URL the user attached (the page's CSP allows no other image source)
        img.alt = `Image ${index + 1}`;
        images.append(img);
      });
      this.root.append(images);
    }
    if (text) this.root.append(el("div", "bubble", text));
  }
}

// Markdown re-rendered at most once a frame while text streams in.
class TextPart {
  constructor() {
    this.root = el("div", "markdown");
    this.text = "";
    this.pending = false;
  }

  delta(text) {
    this.text += text;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => this.render());
  }

  render() {
    this.pending = false;
    this.root.replaceChildren(renderMarkdown(this.text));
  }

  done(item) {
    const text = (item.content || []).map((part) => part.text ?? part.refusal ?? "").join("");
    if (text || !this.text) this.text = text;
    this.render();
  }
}

class ReasoningPart {
  constructor() {
    this.root = el("details", "reasoning");
    this.root.open = true; // open while it streams, folded once the answer starts
    this.summary = el("summary", "", "Reasoning…");
    this.body = el("div", "reasoning-text");
    this.root.append(this.summary, this.body);
  }

  delta(text) {
    // Models open their thinking with a newline or two: not worth a blank line.
    this.body.textContent += this.body.textContent ? text : text.trimStart();
  }

  done(item) {
    const text = [...(item.content || []), ...(item.summary || [])].map((part) => part.text ?? "").join("\n").trim();
    if (text) this.body.textContent = text;
    const words = this.body.textContent.trim().split(/\s+/).filter(Boolean).length;
    this.summary.textContent = item.encrypted_content && !text ? "Reasoning (encrypted)" : `Reasoning (${words} words)`;
    this.root.open = false;
  }
}

class CallPart {
  constructor(kind, item) {
    this.root = el("div", `tool-call ${kind}`);
    this.head = el("div", "tool-head");
    this.root.append(this.head, el("div", "tool-label", "arguments"));
    this.args = el("pre", "tool-args");
    this.root.append(this.args);
    this.setHead(item);
  }

  setHead(item) {
    const where = item.server_label ? `${item.server_label} · ` : "";
    this.head.replaceChildren(el("span", "tool-kind", this.kindLabel(item)), el("code", "tool-name", `${where}${item.name}`));
  }

  kindLabel(item) {
    return item.type === "mcp_call" ? "MCP call" : "Tool call";
  }

  delta(text) {
    this.args.textContent += text;
  }

  done(item) {
    this.setHead(item);
    this.args.textContent = prettyJson(item.arguments ?? this.args.textContent);
  }
}

class FunctionCallPart extends CallPart {
  constructor(item, view) {
    super("function", item);
    this.view = view;
  }

  done(item, settled) {
    super.done(item);
    this.item = item;
    if (settled?.has(item.call_id)) this.showSettled();
    else this.view.pendingCalls.push(this);
  }

  showSettled() {
    this.root.append(el("div", "tool-note", "output sent"));
  }

  // After the response ends: the client runs function tools, so the page asks the person for the output.
  askForOutput() {
    const form = el("form", "tool-output");
    const label = el("label", "", `Output of ${this.item.name}`);
    const input = el("input");
    input.placeholder = '{"result": ...}';
    label.append(input);
    const send = el("button", "turn-action", "Send output");
    send.type = "submit";
    form.append(label, send);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      form.remove();
      this.showSettled();
      this.view.callbacks.onToolOutput?.(this.item.call_id, input.value);
    });
    this.root.append(form);
  }
}

class McpCallPart extends CallPart {
  constructor(item) {
    super("mcp", item);
    this.result = el("div", "tool-result");
    this.root.append(this.result);
  }

  done(item) {
    super.done(item);
    this.result.replaceChildren();
    if (item.error) {
      const error = typeof item.error === "string" ? item.error : JSON.stringify(item.error);
      this.result.append(el("div", "tool-label", "error"), el("pre", "tool-error", error));
    } else if (item.output != null) {
      this.result.append(el("div", "tool-label", "output"), el("pre", "tool-output-text", item.output));
    }
  }
}

class McpListPart {
  constructor(item) {
    this.root = el("div", "tool-note", `Listing the tools of ${item.server_label}…`);
  }

  delta() {}

  done(item) {
    const names = (item.tools || []).map((tool) => tool.name).join(", ");
    this.root.textContent = item.error
      ? `Listing the tools of ${item.server_label} failed: ${item.error}`
      : `${item.server_label} offers ${item.tools?.length ?? 0} tools${names ? `: ${names}` : ""}`;
  }
}

class ApprovalPart {
  constructor(item, view) {
    this.view = view;
    this.root = el("div", "tool-call approval");
    this.root.setAttribute("role", "group");
    this.done(item);
  }

  delta() {}

  done(item, settled) {
    this.item = item;
    this.root.replaceChildren(
      el("div", "tool-head", `${item.server_label} wants to run ${item.name}`),
      el("pre", "tool-args", prettyJson(item.arguments || "{}")));
    this.root.setAttribute("aria-label", `Approval for ${item.name}`);
    if (settled?.has(item.id)) this.root.append(el("div", "tool-note", "answered"));
    else if (!this.view.pendingApprovals.includes(this)) this.view.pendingApprovals.push(this);
  }

  ask() {
    const buttons = el("div", "approval-buttons");
    const decide = (approve) => {
      buttons.replaceWith(el("div", "tool-note", approve ? "approved" : "denied"));
      this.view.callbacks.onApproval?.(this.item.id, approve);
    };
    const approve = el("button", "turn-action primary", "Approve");
    const deny = el("button", "turn-action", "Deny");
    approve.type = deny.type = "button";
    approve.addEventListener("click", () => decide(true));
    deny.addEventListener("click", () => decide(false));
    buttons.append(approve, deny);
    this.root.append(buttons);
  }
}

export class AnswerView {
  constructor(callbacks = {}) {
    this.callbacks = callbacks;
    this.root = el("article", "message assistant");
    this.root.setAttribute("aria-label", "Answer");
    this.parts = new Map(); // output_index -> part
    this.body = el("div", "answer-body");
    this.footer = el("footer", "answer-footer");
    this.stats = el("span", "stats");
    this.footer.append(this.stats);
    if (callbacks.onRequest) {
      const show = el("button", "link-button", "Request");
      show.type = "button";
      show.setAttribute("aria-label", "Show the request behind this answer");
      show.addEventListener("click", callbacks.onRequest);
      this.footer.append(show);
    }
    this.root.append(this.body, this.footer);
    this.pendingCalls = [];
    this.pendingApprovals = [];
  }

  start() {
    this.startedAt = performance.now();
    this.firstTokenAt = null;
    this.lastTokenAt = null;
    this.root.classList.add("streaming");
    this.root.setAttribute("aria-busy", "true");
    this.stats.textContent = "waiting for the first token…";
  }

  tokenArrived() {
    const now = performance.now();
    if (this.firstTokenAt === null) {
      this.firstTokenAt = now;
      this.stats.textContent = `first token after ${Math.round(now - this.startedAt)} ms…`;
    }
    this.lastTokenAt = now;
  }

  part(index, item) {
    let part = this.parts.get(index);
    if (!part && item) {
      part = this.newPart(item);
      this.parts.set(index, part);
      this.body.append(part.root);
    }
    return part;
  }

  newPart(item) {
    switch (item.type) {
      case "reasoning": return new ReasoningPart();
      case "function_call": return new FunctionCallPart(item, this);
      case "mcp_call": return new McpCallPart(item);
      case "mcp_list_tools": return new McpListPart(item);
      case "mcp_approval_request": return new ApprovalPart(item, this);
      default: return new TextPart();
    }
  }

  // One Responses streaming event.
  onEvent(event) {
    switch (event.type) {
      case "response.created":
        this.root.dataset.responseId = event.response.id;
        this.root.dataset.model = event.response.model;
        this.root.title = `${event.response.model} · ${event.response.id}`;
        break;
      case "response.output_item.added":
        this.part(event.output_index, event.item);
        break;
      case "response.output_text.delta":
      case "response.reasoning_text.delta":
      case "response.function_call_arguments.delta":
      case "response.mcp_call_arguments.delta":
        this.tokenArrived();
        this.part(event.output_index, { type: typeForDelta(event.type) })?.delta(event.delta);
        if (event.type !== "response.reasoning_text.delta") this.foldReasoning();
        break;
      case "response.output_item.done":
        this.part(event.output_index, event.item)?.done(event.item);
        break;
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
        this.finalResponse = event.response;
        break;
      case "error":
        this.showProblem(event.message || event.error?.message || "the stream reported an error");
        break;
      default:
        break;
    }
  }

  foldReasoning() {
    for (const part of this.parts.values()) if (part instanceof ReasoningPart && !part.folded) {
      part.folded = true;
      part.root.open = false;
    }
  }

  end() {
    this.settle();
    const response = this.finalResponse;
    if (!response) {
      this.showProblem("the stream ended without a final response");
    } else if (response.status === "failed") {
      this.showProblem(response.error?.message || "the response failed");
    } else if (response.status === "incomplete") {
      this.root.classList.add("incomplete");
      this.showProblem(`incomplete: ${response.incomplete_details?.reason ?? "stopped early"}`, "note");
    }
    this.showStats(response?.usage);
    for (const call of this.pendingCalls) call.askForOutput();
    for (const approval of this.pendingApprovals) approval.ask();
  }

  stopped() {
    this.settle();
    this.root.classList.add("stopped");
    // rostra keeps a turn in the conversation once it has ended; one cut off is not kept.
    this.showProblem("stopped: this turn is not kept in the conversation", "note");
    this.showStats(null);
  }

  failed(message) {
    this.settle();
    this.showProblem(message);
    this.stats.textContent = "";
  }

  settle() {
    this.root.classList.remove("streaming");
    this.root.removeAttribute("aria-busy");
    for (const part of this.parts.values()) if (part instanceof TextPart && part.pending) part.render();
  }

  showProblem(message, kind = "error") {
    this.body.append(el("div", `answer-${kind}`, message));
  }

  showStats(usage) {
    const facts = [];
    if (usage) {
      const reasoning = usage.output_tokens_details?.reasoning_tokens;
      facts.push(`${usage.input_tokens} in · ${usage.output_tokens} out${reasoning ? ` (${reasoning} reasoning)` : ""}`);
    }
    if (this.firstTokenAt !== null) {
      facts.push(`TTFT ${Math.round(this.firstTokenAt - this.startedAt)} ms`);
      const seconds = (this.lastTokenAt - this.firstTokenAt) / 1000;
      // Only over a real stretch of time: output that arrives in one burst has no meaningful rate.
      if (usage && usage.output_tokens > 1 && seconds >= 0.05) {
        facts.push(`${((usage.output_tokens - 1) / seconds).toFixed(1)} tok/s`);
      }
    }
    this.stats.textContent = facts.join(" · ");
  }

  // A stored item of a conversation (opening it later): drawn as the stream drew it.
  addStoredItem(item, settled) {
    this.part(this.parts.size, item).done(item, settled);
  }
}

function typeForDelta(type) {
  return { "response.reasoning_text.delta": "reasoning", "response.function_call_arguments.delta": "function_call",
           "response.mcp_call_arguments.delta": "mcp_call" }[type] ?? "message";
}
