// The playground: a chat over rostra's public API. Each turn is one streamed POST /v1/responses in a
// stored conversation (the Conversations API keeps the history on the server, so reloading the page or
// opening it elsewhere finds it); the sidebar lists conversations (GET /v1/conversations, a rostra
// extension), the model picker reads /v1/models. Nothing the model writes is ever parsed as HTML: text
// goes in with textContent, Markdown through markdown.js, which builds DOM nodes.

import { Api, ApiError } from "./api.js";
import { Attachments, imageUrls } from "./attachments.js";
import { copyText } from "./markdown.js";
import { curlSnippet, javascriptSnippet, pythonSnippet } from "./snippets.js";
import { AnswerView, UserMessage } from "./views.js";

const KEY_STORAGE = "rostra.playground.apiKey";
const SETTINGS_STORAGE = "rostra.playground.settings";
const TITLE_LENGTH = 60;

const $ = (id) => document.getElementById(id);

const state = {
  conversationId: null,
  conversations: [],
  controller: null, // the running turn's AbortController
  lastRequest: null,
  needsKey: false,
  mcpServers: [],
};

const api = new Api(() => localStorage.getItem(KEY_STORAGE) || "");
const attachments = new Attachments($("attachments"), (problem) => showError(problem));

// -- settings (kept in this browser) -------------------------------------------------------------

const SETTING_FIELDS = ["instructions", "temperature", "top_p", "max_output_tokens", "function-tools"];

function loadSettings() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || "{}");
  } catch {
    saved = {};
  }
  for (const field of SETTING_FIELDS) if (typeof saved[field] === "string") $(field).value = saved[field];
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  return saved;
}

function saveSettings() {
  const saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || "{}");
  for (const field of SETTING_FIELDS) saved[field] = $(field).value;
  saved.model = $("model").value;
  saved.mcp = Object.fromEntries([...document.querySelectorAll("[data-mcp-label]")].map((row) => [
    row.dataset.mcpLabel,
    { enabled: row.querySelector("input").checked, approval: row.querySelector("select").value },
  ]));
  localStorage.setItem(SETTINGS_STORAGE, JSON.stringify(saved));
}

function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
  $("api-key").value = key;
}

// -- requests ------------------------------------------------------------------------------------

function numberSetting(id) {
  const raw = $(id).value.trim();
  return raw === "" ? undefined : Number(raw);
}

function tools() {
  const raw = $("function-tools").value.trim();
  let functions = [];
  if (raw) {
    try {
      functions = JSON.parse(raw);
    } catch (error) {
      throw new Error(`Function tools: not JSON (${error.message})`);
    }
    if (!Array.isArray(functions)) throw new Error("Function tools: expected a JSON list");
  }
  const mcp = [...document.querySelectorAll("[data-mcp-label]")]
    .filter((row) => row.querySelector("input").checked)
    .map((row) => ({ type: "mcp", server_label: row.dataset.mcpLabel,
                     require_approval: row.querySelector("select").value }));
  return [...functions, ...mcp];
}

// The body of one turn: what the stream sends, and what "Show request" writes out.
function requestBody(input) {
  const body = { model: $("model").value, input };
  if (state.conversationId) body.conversation = state.conversationId;
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  for (const field of ["temperature", "top_p", "max_output_tokens"]) {
    const value = numberSetting(field);
    if (value !== undefined && !Number.isNaN(value)) body[field] = value;
  }
  const turnTools = tools();
  if (turnTools.length) body.tools = turnTools;
  body.stream = true;
  return body;
}

// -- the conversation --------------------------------------------------------------------------

const messages = $("messages");

function nearBottom() {
  return messages.scrollHeight - messages.scrollTop - messages.clientHeight < 80;
}

function follow(wasNearBottom) {
  if (wasNearBottom) messages.scrollTop = messages.scrollHeight;
}

const welcome = $("welcome");

function clearMessages(showWelcome = false) {
  messages.replaceChildren(...(showWelcome ? [welcome] : []));
}

function showError(message) {
  const banner = $("error-banner");
  banner.textContent = message;
  banner.hidden = !message;
}

function handleApiFailure(error) {
  if (error instanceof ApiError && error.status === 401) {
    state.needsKey = true;
    $("auth-banner").hidden = false;
    $("auth-banner-key").focus();
    return;
  }
  showError(error.message);
}

async function ensureConversation(firstText) {
  if (state.conversationId) return;
  const title = firstText.replace(/\s+/g, " ").trim().slice(0, TITLE_LENGTH) || "New chat";
  const conversation = await api.post("/v1/conversations", { metadata: { title } });
  state.conversationId = conversation.id;
  state.conversations.unshift(conversation);
  history.replaceState(null, "", `#${conversation.id}`);
  renderConversationList();
}

// One turn: the input (the user's message, a tool's output, an approval) streamed into a new answer view.
async function runTurn(input, userText, userImages = []) {
  showError("");
  let body;
  try {
    requestBody(input); // settings that do not parse stop the turn before a conversation is made for it
    if (userText !== undefined) await ensureConversation(userText || (userImages.length ? "Image" : ""));
    body = requestBody(input);
  } catch (error) {
    handleApiFailure(error);
    return false;
  }
  const keepFollowing = nearBottom();
  welcome.remove();
  if (userText !== undefined) messages.append(new UserMessage(userText, userImages).root);
  const answer = new AnswerView({ onRequest: () => openRequestDialog(body), onToolOutput: sendToolOutput,
                                  onApproval: sendApproval });
  messages.append(answer.root);
  follow(keepFollowing);
  state.lastRequest = body;
  state.controller = new AbortController();
  setBusy(true);
  answer.start();
  try {
    await api.stream(body, (event) => {
      const wasNearBottom = nearBottom();
      answer.onEvent(event);
      follow(wasNearBottom);
    }, state.controller.signal);
    answer.end();
  } catch (error) {
    if (error.name === "AbortError") answer.stopped();
    else {
      answer.failed(error.message);
      if (error instanceof ApiError && error.status === 401) handleApiFailure(error);
    }
  } finally {
    state.controller = null;
    setBusy(false);
    follow(nearBottom());
  }
  return true;
}

function sendToolOutput(callId, output) {
  return runTurn([{ type: "function_call_output", call_id: callId, output }]);
}

function sendApproval(requestId, approve) {
  return runTurn([{ type: "mcp_approval_response", approval_request_id: requestId, approve }]);
}

function setBusy(busy) {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  document.body.classList.toggle("busy", busy);
  for (const button of messages.querySelectorAll(".turn-action")) button.disabled = busy;
}

function stop() {
  state.controller?.abort();
}

async function send() {
  const prompt = $("prompt");
  const text = prompt.value;
  if ((!text.trim() && !attachments.count) || state.controller) return;
  prompt.value = "";
  const images = attachments.take();
  if (!(await runTurn(userInput(text, images), text, imageUrls(images)))) {
    prompt.value = text;
    attachments.restore(images);
  }
  prompt.focus();
}

// The user's turn: plain text as the input string; with images, one user message holding the text and
// the images as `input_image` parts (in the order the model is shown them).
function userInput(text, images) {
  if (!images.length) return text;
  const content = [...(text.trim() ? [{ type: "input_text", text }] : []), ...images];
  return [{ type: "message", role: "user", content }];
}

// -- the sidebar ---------------------------------------------------------------------------------

function titleOf(conversation) {
  return conversation.metadata?.title || `Conversation ${new Date(conversation.created_at * 1000).toLocaleString()}`;
}

function renderConversationList() {
  const list = $("conversations");
  list.replaceChildren();
  $("conversations-empty").hidden = state.conversations.length > 0;
  for (const conversation of state.conversations) {
    const item = document.createElement("li");
    item.dataset.conversationId = conversation.id;
    if (conversation.id === state.conversationId) item.classList.add("current");
    const open = document.createElement("button");
    open.type = "button";
    open.className = "conversation-open";
    open.textContent = titleOf(conversation);
    if (conversation.id === state.conversationId) open.setAttribute("aria-current", "true");
    open.addEventListener("click", () => openConversation(conversation.id));
    const rename = smallButton("✎", `Rename ${titleOf(conversation)}`, () => startRename(item, conversation));
    rename.classList.add("conversation-rename");
    const remove = smallButton("×", `Delete ${titleOf(conversation)}`, () => deleteConversation(conversation));
    remove.classList.add("conversation-delete");
    item.append(open, rename, remove);
    list.append(item);
  }
}

function smallButton(text, label, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "icon-button";
  button.textContent = text;
  button.setAttribute("aria-label", label);
  button.title = label;
  button.addEventListener("click", onClick);
  return button;
}

function startRename(item, conversation) {
  const input = document.createElement("input");
  input.className = "rename-input";
  input.value = titleOf(conversation);
  input.setAttribute("aria-label", "New title (Enter saves, Escape cancels)");
  item.replaceChildren(input);
  input.focus();
  input.select();
  let finished = false;
  const finish = async (save) => {
    if (finished) return;
    finished = true;
    const title = input.value.trim().slice(0, 512);
    if (save && title) {
      try {
        const updated = await api.post(`/v1/conversations/${conversation.id}`,
                                       { metadata: { ...conversation.metadata, title } });
        Object.assign(conversation, updated);
      } catch (error) {
        handleApiFailure(error);
      }
    }
    renderConversationList();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") finish(true);
    if (event.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
}

async function deleteConversation(conversation) {
  if (!confirm(`Delete "${titleOf(conversation)}"?`)) return;
  try {
    await api.delete(`/v1/conversations/${conversation.id}`);
  } catch (error) {
    handleApiFailure(error);
    return;
  }
  state.conversations = state.conversations.filter((c) => c.id !== conversation.id);
  if (state.conversationId === conversation.id) newChat();
  else renderConversationList();
}

async function loadConversations() {
  try {
    state.conversations = await api.listAll("/v1/conversations", { order: "desc" });
  } catch (error) {
    handleApiFailure(error);
    return;
  }
  renderConversationList();
}

function newChat() {
  stop();
  state.conversationId = null;
  history.replaceState(null, "", location.pathname);
  clearMessages(true);
  renderConversationList();
  closeSidebarOnPhone();
  $("prompt").focus();
}

// A stored conversation, drawn as it streamed: the user's messages, then each answer's items.
async function openConversation(id) {
  stop();
  let items;
  try {
    items = await api.listAll(`/v1/conversations/${id}/items`, { order: "asc" });
  } catch (error) {
    handleApiFailure(error);
    return;
  }
  state.conversationId = id;
  history.replaceState(null, "", `#${id}`);
  clearMessages();
  let answer = null;
  // Calls the client has answered (a tool's output, an approval): drawn as answered.
  const settled = new Set(items.map((item) => item.type === "mcp_approval_response" ? item.approval_request_id
    : item.type === "function_call_output" ? item.call_id : null).filter(Boolean));
  for (const item of items) {
    if (item.type === "message" && item.role === "user") {
      answer = null;
      messages.append(new UserMessage(messageText(item), imageUrls(item.content)).root);
    } else if (item.type === "message" && item.role !== "assistant") {
      continue; // system and developer messages another client stored: not part of the chat as drawn
    } else if (item.type === "function_call_output" || item.type === "mcp_approval_response") {
      answer = null; // what the client sent back starts the next answer
    } else {
      if (!answer) {
        answer = new AnswerView({ onToolOutput: sendToolOutput, onApproval: sendApproval });
        messages.append(answer.root);
      }
      answer.addStoredItem(item, settled);
    }
  }
  renderConversationList();
  closeSidebarOnPhone();
  messages.scrollTop = messages.scrollHeight;
}

function messageText(item) {
  if (typeof item.content === "string") return item.content;
  return (item.content || []).map((part) => part.text ?? "").join("");
}

// -- models and server facts ---------------------------------------------------------------------

async function loadModels(saved) {
  let models;
  let health = {};
  try {
    models = (await api.get("/v1/models")).data;
  } catch (error) {
    handleApiFailure(error);
    return false;
  }
  try {
    health = await (await fetch("/health")).json();
  } catch {
    health = {};
  }
  const select = $("model");
  select.replaceChildren();
  for (const model of models) {
    const option = document.createElement("option");
    option.value = model.id;
    option.textContent = model.id + modelState(model.id, health);
    select.append(option);
  }
  if (saved.model && models.some((model) => model.id === saved.model)) select.value = saved.model;
  return true;
}

// A gateway serves models from upstreams that come and go: show which are reachable now.
function modelState(id, health) {
  if (!Array.isArray(health.upstreams)) return "";
  const serving = health.upstreams.filter((upstream) => upstream.models?.includes(id));
  if (!serving.length) return "";
  const healthy = serving.filter((upstream) => upstream.healthy).length;
  return healthy ? ` (${healthy}/${serving.length} up)` : " (down)";
}

async function loadServerConfig(saved) {
  let config;
  try {
    config = await api.get("/playground/config");
  } catch {
    return;
  }
  const list = $("mcp-server-list");
  list.replaceChildren();
  for (const label of config.tool_servers) {
    const previous = saved.mcp?.[label] ?? { enabled: true, approval: "always" };
    const row = document.createElement("div");
    row.className = "mcp-server";
    row.dataset.mcpLabel = label;
    const toggle = document.createElement("label");
    const checkbox = document.createElement("input");
    checkbox.type = "checkbox";
    checkbox.checked = previous.enabled;
    toggle.append(checkbox, document.createTextNode(` ${label}`));
    const approval = document.createElement("select");
    approval.setAttribute("aria-label", `Approvals for ${label}`);
    for (const [value, text] of [["always", "ask before each call"], ["never", "run without asking"]]) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = text;
      approval.append(option);
    }
    approval.value = previous.approval;
    row.append(toggle, approval);
    list.append(row);
  }
  $("mcp-servers").hidden = config.tool_servers.length === 0;
}

// -- "Show request" ------------------------------------------------------------------------------

let dialogBody = null;
let dialogLanguage = "curl";

function openRequestDialog(body) {
  dialogBody = body;
  renderSnippet();
  const dialog = $("request-dialog");
  if (!dialog.open) dialog.showModal();
}

function pendingRequest() {
  const text = $("prompt").value;
  if (text.trim() || attachments.count) return requestBody(userInput(text, attachments.peek()));
  return state.lastRequest || requestBody("Hello!");
}

function renderSnippet() {
  const base = location.origin;
  const needsKey = state.needsKey || Boolean(localStorage.getItem(KEY_STORAGE));
  const write = { curl: curlSnippet, python: pythonSnippet, javascript: javascriptSnippet }[dialogLanguage];
  $("request-code").textContent = write(base, dialogBody, needsKey);
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.lang === dialogLanguage));
    tab.tabIndex = tab.dataset.lang === dialogLanguage ? 0 : -1;
  }
}

// -- the phone-sized layout ----------------------------------------------------------------------

function closeSidebarOnPhone() {
  if (matchMedia("(max-width: 760px)").matches) toggleSidebar(false);
}

function toggleSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("menu-toggle").setAttribute("aria-expanded", String(open));
}

function toggleSettings(open) {
  $("settings").hidden = !open;
  $("settings-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("instructions").focus();
  else $("settings-toggle").focus();
}

// -- wiring --------------------------------------------------------------------------------------

function wire() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $("stop").addEventListener("click", stop);
  wireAttachments();
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || $("request-dialog").open) return;
    if (document.body.classList.contains("sidebar-open")) toggleSidebar(false);
    else if (state.controller) stop();
  });
  // On a phone the sidebar lies over the chat: a tap beside it closes it.
  document.querySelector(".chat").addEventListener("click", () => {
    if (document.body.classList.contains("sidebar-open")) toggleSidebar(false);
  });
  $("new-chat").addEventListener("click", newChat);
  $("menu-toggle").addEventListener("click", () => toggleSidebar(!document.body.classList.contains("sidebar-open")));
  $("settings-toggle").addEventListener("click", () => toggleSettings($("settings").hidden));
  $("settings-close").addEventListener("click", () => toggleSettings(false));
  $("settings").addEventListener("change", saveSettings);
  $("model").addEventListener("change", saveSettings);
  $("api-key").addEventListener("change", async () => {
    setApiKey($("api-key").value.trim());
    await start();
  });
  $("auth-banner-save").addEventListener("click", async () => {
    setApiKey($("auth-banner-key").value.trim());
    $("auth-banner").hidden = true;
    await start();
  });
  $("auth-banner-key").addEventListener("keydown", (event) => {
    if (event.key === "Enter") $("auth-banner-save").click();
  });
  $("show-request").addEventListener("click", () => {
    try {
      openRequestDialog(pendingRequest());
    } catch (error) {
      showError(error.message);
    }
  });
  $("request-close").addEventListener("click", () => $("request-dialog").close());
  $("request-copy").addEventListener("click", () => copyText($("request-code").textContent, $("request-copy")));
  const tabs = [...document.querySelectorAll("[role=tab]")];
  for (const tab of tabs) {
    tab.addEventListener("click", () => {
      dialogLanguage = tab.dataset.lang;
      renderSnippet();
    });
    tab.addEventListener("keydown", (event) => { // arrow keys move between tabs (the ARIA tabs pattern)
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (!step) return;
      const next = tabs[(tabs.indexOf(tab) + step + tabs.length) % tabs.length];
      next.focus();
      next.click();
    });
  }
}

// Images come in by the picker (a button, so the keyboard reaches it), a paste into the message box, or a
// drop anywhere on the composer.
function wireAttachments() {
  const picker = $("image-picker");
  $("attach").addEventListener("click", () => picker.click());
  picker.addEventListener("change", async () => {
    await attachments.add([...picker.files]);
    picker.value = ""; // the same file can be picked again
    $("prompt").focus();
  });
  $("prompt").addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files || [])];
    if (!files.length) return; // text pastes as text
    event.preventDefault();
    attachments.add(files);
  });
  const composer = $("composer");
  composer.addEventListener("dragover", (event) => {
    if (![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    composer.classList.add("dropping");
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
  composer.addEventListener("drop", (event) => {
    event.preventDefault();
    composer.classList.remove("dropping");
    attachments.add([...event.dataTransfer.files]);
  });
}

async function start() {
  const saved = loadSettings();
  if (!(await loadModels(saved))) return;
  $("auth-banner").hidden = true;
  showError("");
  await Promise.all([loadConversations(), loadServerConfig(saved)]);
  const wanted = location.hash.slice(1);
  if (wanted && state.conversations.some((c) => c.id === wanted)) await openConversation(wanted);
  document.body.dataset.ready = "true"; // for tests and for people: the page has what it needs
}

wire();
start();
