// rostra's public API as the page uses it: JSON calls and a Responses stream read from fetch (Server-Sent
// Events over a POST, which EventSource cannot send). The key, when there is one, goes in the
// Authorization header of every call; it never leaves the browser otherwise.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export class Api {
  constructor(getKey) {
    this.getKey = getKey;
  }

  headers(extra = {}) {
    const key = this.getKey();
    return { ...extra, ...(key ? { Authorization: `Bearer ${key}` } : {}) };
  }

  async json(method, path, body) {
    const response = await fetch(path, {
      method,
      headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return readJson(response);
  }

  get(path) { return this.json("GET", path); }
  post(path, body) { return this.json("POST", path, body); }
  delete(path) { return this.json("DELETE", path); }

  // Every page of a list endpoint (OpenAI's cursor paging: `after` the last id while `has_more`).
  async listAll(path, params = {}) {
    const items = [];
    let after = null;
    for (;;) {
      const query = new URLSearchParams({ ...params, limit: "100", ...(after ? { after } : {}) });
      const page = await this.get(`${path}?${query}`);
      items.push(...page.data);
      if (!page.has_more || !page.data.length) return items;
      after = page.last_id;
    }
  }

  // POST /v1/responses with stream: true; calls onEvent(event) for each SSE event, in order. Aborting
  // `signal` closes the connection, and rostra stops the generation when its client goes away.
  async stream(body, onEvent, signal) {
    const response = await fetch("/v1/responses", {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
      signal,
    });
    if (!response.ok) await readJson(response); // throws the API's error
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser(onEvent);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(value);
    }
    parser.finish();
  }
}

async function readJson(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = body?.error;
    // The part of the request at fault, when the server names it (an image part a model cannot see).
    const where = error?.param ? ` (${error.param})` : "";
    const message = error?.message ? error.message + where : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message, body);
  }
  return body;
}

// Server-Sent Events: events are separated by a blank line; their `data:` lines joined by newlines are
// the payload (here JSON; `[DONE]` is not sent by the Responses API but is ignored if it comes).
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
  }

  feed(text) {
    this.buffer += text;
    let end;
    while ((end = this.buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      this.dispatch(block);
    }
  }

  finish() {
    if (this.buffer.trim()) this.dispatch(this.buffer);
    this.buffer = "";
  }

  dispatch(block) {
    const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
    if (!data || data === "[DONE]") return;
    this.onEvent(JSON.parse(data));
  }
}
