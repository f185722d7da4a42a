// "Show request": the same POST /v1/responses as curl, Python (openai) and JavaScript (openai). The key
// itself is never written into them: they read ROSTRA_API_KEY from the environment.

// The body goes in on standard input from a quoted here-document: nothing in it is expanded or needs escaping,
// and an attached image's long data URL is not a command-line argument (Linux caps one at 128 KiB).
export function curlSnippet(baseUrl, body, needsKey) {
  return [
    `curl -N ${baseUrl}/v1/responses \\`,
    `  -H "Content-Type: application/json" \\`,
    ...(needsKey ? [`  -H "Authorization: Bearer $ROSTRA_API_KEY" \\`] : []),
    `  --data-binary @- <<'JSON'`,
    JSON.stringify(body, null, 2),
    "JSON",
  ].join("\n");
}

export function pythonSnippet(baseUrl, body, needsKey) {
  const kwargs = Object.entries(body).map(([key, value]) => `    ${key}=${python(value, 1)},`).join("\n");
  return [
    "import os",
    "",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${python(`${baseUrl}/v1`)}, ` +
      (needsKey ? `api_key=os.environ["ROSTRA_API_KEY"])` : `api_key=os.environ.get("ROSTRA_API_KEY", "unused"))`),
    "stream = client.responses.create(",
    kwargs,
    ")",
    "for event in stream:",
    "    if event.type in (\"response.output_text.delta\", \"response.reasoning_text.delta\"):",
    "        print(event.delta, end=\"\", flush=True)",
    "    elif event.type == \"response.output_item.done\" and event.item.type == \"function_call\":",
    "        print(f\"\\n{event.item.name}({event.item.arguments})\")",
    "print()",
  ].join("\n");
}

export function javascriptSnippet(baseUrl, body, needsKey) {
  const apiKey = needsKey ? "process.env.ROSTRA_API_KEY" : `process.env.ROSTRA_API_KEY ?? "unused"`;
  return [
    `import OpenAI from "openai";`,
    "",
    `const client = new OpenAI({ baseURL: ${JSON.stringify(`${baseUrl}/v1`)}, apiKey: ${apiKey} });`,
    `const stream = await client.responses.create(${JSON.stringify(body, null, 2)});`,
    "for await (const event of stream) {",
    `  if (event.type === "response.output_text.delta" || event.type === "response.reasoning_text.delta") {`,
    "    process.stdout.write(event.delta);",
    "  }",
    "}",
    `process.stdout.write("\\n");`,
  ].join("\n");
}

// A JSON value as a Python literal (True/False/None; strings as JSON writes them, which Python reads too).
function python(value, depth = 0) {
  const pad = "    ".repeat(depth + 1);
  const end = "    ".repeat(depth);
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "None";
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return `[\n${value.map((item) => `${pad}${python(item, depth + 1)},`).join("\n")}\n${end}]`;
  }
  const entries = Object.entries(value);
  if (!entries.length) return "{}";
  return `{\n${entries.map(([key, item]) => `${pad}${JSON.stringify(key)}: ${python(item, depth + 1)},`).join("\n")}\n${end}}`;
}
