// Schema-driven fuzzing of a live agent's API (CTest api_fuzz.schema, through
// api_fuzz_test.sh, which starts the agent and passes its addresses here).
//
// Requests for every operation of docs/openapi.yaml, good and bad: bodies,
// path and query parameters generated from the document's schemas by
// json-schema-faker, then, for about half of them, broken by fast-check's
// arbitraries (a required field dropped, a value of the wrong type, huge
// numbers, duplicate keys, bytes that are not JSON, path parameters with
// "../" and "%2f", a wrong token, a viewer's token on a route that needs
// more, a method the path does not take). Every
// answer is held to the document (ajv, JSON Schema 2020-12): its status is one
// the operation lists (or, for a target that is no route, 404/405), its
// Content-Type is listed, its required headers are there, its JSON body fits
// the schema; the frames of an events stream opened first fit `Event`.
//
// Any 5xx fails, except the few the document gives a cause outside the agent:
// 503 `draining` (a create on a drained agent), 503 `unavailable` and 504
// `deadline_exceeded` from a pull (the loopback registry below is not there)
// and 504 from an exec past its timeout_s.
//
// Nothing leaves the loopback: an image reference in a request that may pull
// (POST /v1/images/pull, POST /v1/kernels with "pull": "tag" or "digest") is
// put under a registry on 127.0.0.1 where nothing listens, and a last check
// before sending withholds any request that could still pull from elsewhere.
// Kernels are small (the agent has 2 cores, 1 GiB), exec timeouts short, and
// every kernel made is deleted at the end.
//
// Bounded: --runs requests at most, and no new request after --time-limit-s.
// Reproducible: every value comes from --seed (printed); a failure prints the
// request's index and bytes. The same seed replays the same sequence.
//
// Usage: node fuzz.mjs --doc FILE --tcp HOST:PORT --socket PATH --token TOKEN
//          --viewer-token TOKEN --image NAME --devices ID,ID --registry HOST:PORT
//          [--seed N] [--runs N] [--time-limit-s N] [--verbose]
import fs from "node:fs";
import http from "node:http";
import { parseArgs } from "node:util";

import Ajv2020 from "ajv/dist/2020.js";
import fc from "fast-check";
import { generateSync } from "json-schema-faker";
import YAML from "yaml";

const { values: args } = parseArgs({
  options: {
    doc: { type: "string" },
    tcp: { type: "string" },
    socket: { type: "string" },
    token: { type: "string" },
    "viewer-token": { type: "string" },
    image: { type: "string" },
    devices: { type: "string", default: "" },
    registry: { type: "string" },
    seed: { type: "string", default: String(Date.now() % 2147483647) },
    runs: { type: "string", default: "3000" },
    "time-limit-s": { type: "string", default: "40" },
    verbose: { type: "boolean", default: false },
  },
});
for (const required of ["doc", "tcp", "socket", "token", "viewer-token", "image", "registry"])
  if (!args[required]) {
    console.error(`fuzz.mjs: --${required} is required (see the usage at the top of the file)`);
    process.exit(2);
  }
const seed = Number(args.seed);
const runs = Number(args.runs);
const timeLimitMs = Number(args["time-limit-s"]) * 1000;
const [tcpHost, tcpPort] = args.tcp.split(":");
const devices = args.devices ? args.devices.split(",") : [];

// ---- The document: its operations, and validators of its answers.

const doc = YAML.parse(fs.readFileSync(args.doc, "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(doc, "openapi");

const pointerPart = (s) => s.replaceAll("~", "~0").replaceAll("/", "~1");
// The node a local "#/..." reference names.
function resolve(ref) {
  let node = doc;
  for (const part of ref.slice(2).split("/")) node = node[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  return node;
}
// [node, its JSON pointer], following one "$ref".
function deref(node, pointer) {
  return node && node.$ref ? [resolve(node.$ref), node.$ref] : [node, pointer];
}
const validators = new Map();
// A validator of the schema at `pointer` ("#/..."), compiled once.
function validatorAt(pointer) {
  if (!validators.has(pointer)) validators.set(pointer, ajv.compile({ $ref: "openapi" + pointer }));
  return validators.get(pointer);
}
// A schema to generate from: `schema` with the document's components for its "$ref"s.
const generable = (schema) => ({ ...schema, components: doc.components });

const METHODS = ["get", "put", "post", "delete", "patch"];
const operations = [];
for (const [pattern, item] of Object.entries(doc.paths)) {
  for (const method of METHODS) {
    const op = item[method];
    if (!op) continue;
    const parameters = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p) => deref(p)[0]);
    const base = `#/paths/${pointerPart(pattern)}/${method}`;
    const body = op.requestBody?.content?.["application/json"]?.schema;
    operations.push({
      id: op.operationId,
      method: method.toUpperCase(),
      pattern,
      segments: split(pattern),
      parameters,
      body: body ? deref(body, `${base}/requestBody/content/application~1json/schema`) : null,
      responses: op.responses,
      responsesPointer: `${base}/responses`,
      role: op["x-slotd-role"],
    });
  }
}

// ---- Routing as the agent does (src/api/router.cc): segments, one trailing
// slash ignored, a placeholder matches one non-empty segment, literals compare
// percent-decoded.

function split(path) {
  if (path.startsWith("/")) path = path.slice(1);
  if (path.endsWith("/")) path = path.slice(0, -1);
  return path === "" ? [] : path.split("/");
}
const percentDecode = (s) => Buffer.from(s.replace(/%([0-9a-fA-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16))), "latin1").toString("utf8");
// The operation `method` `path` reaches, or why none: {op} | {allow: [...]} (405) | {} (404).
function route(method, path) {
  const parts = split(path);
  const allow = [];
  for (const op of operations) {
    if (op.segments.length !== parts.length) continue;
    const fits = op.segments.every((seg, i) => (seg.startsWith("{") ? parts[i] !== "" : seg === percentDecode(parts[i])));
    if (!fits) continue;
    if (op.method === method) return { op };
    allow.push(op.method);
  }
  return allow.length ? { allow } : {};
}

// ---- What the agent holds, for path parameters that name real things.

const known = {
  kernels: new Set(),  // kernel ids the agent answered for
  execs: [],           // {kernel, exec} from 101 answers
  made: new Set(),     // every kernel id a create answered 200/201 for (deleted at the end)
};

// ---- Generation: every random choice is fast-check's, from the seed.

const hostileSegments = [
  "..", ".", "../..", "..%2f..%2fcontainers%2fjson", "..%2F..%2Fcontainers%2Fjson", "%2e%2e", "%2e%2e%2f",
  "..%5c..", "a%00b", "%00", "%ff%fe", "%", "%zz", "%2", "mock0%2f..", "..%2f", "%2f", "k;id", "*", "0", "-1",
  "1e400", "9".repeat(40), "a".repeat(300), "%E2%80%AE", "%C3%A9", "%0d%0aX-Injected:%201", "json?x=1", "%3F", "%23",
  "containers%2fjson", "%2e", "~", "$%7bjndi%7d",
];
const oddNumbers = ["18446744073709551616", "-9223372036854775809", "1e309", "-1e309", "1e-400", "0.5", "-0", "-1",
                    "0", "4294967296", "1e2", "99999999999999999999999999999999999999"];
const brokenBodies = ["", "{", "}", "[", "null", "true", "0", '""', "[]", '{"a":}', "{'a':1}", "{,}", '{"a":1,}',
                      "\ufeff{}", "{}garbage", "{} {}", "NaN", '{"a":NaN}', "/* c */{}", '{"a":"\\ud800"}',
                      '{"a":"\\u00"}', "[".repeat(5000) + "]".repeat(5000), '{"a":'.repeat(3000) + "1" + "}".repeat(3000)];

// Percent-encodes every byte but the unreserved ones.
const encodeBytes = (bytes) => Array.from(bytes, (b) => /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : "%" + b.toString(16).toUpperCase().padStart(2, "0")).join("");

const jsfSeed = fc.integer({ min: 1, max: 2147483646 });
// `arb` once in `oneIn` draws, null otherwise.
const rarely = (arb, oneIn) => fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
// One request's random choices; turned into bytes by build(), which also
// reads what the agent holds now.
const choicesArb = fc.record({
  op: fc.nat({ max: operations.length - 1 }),
  jsfSeed,
  transport: fc.constantFrom("tcp", "tcp", "tcp", "unix"),
  auth: fc.constantFrom("token", "token", "token", "token", "token", "viewer", "none", "wrong", "lower", "basic"),
  wrongMethod: rarely(fc.constantFrom("GET", "POST", "DELETE", "PUT", "PATCH"), 15),
  // path parameters: [kind, random parts]
  params: fc.array(fc.record({
    kind: fc.constantFrom("known", "known", "known", "schema", "hostile", "bytes", "unicode", "empty", "slash"),
    hostile: fc.constantFrom(...hostileSegments),
    bytes: fc.uint8Array({ maxLength: 24 }),
    unicode: fc.string({ unit: "binary", maxLength: 12 }),
    pick: fc.nat(),
  }), { minLength: 2, maxLength: 2 }),
  trailingSlash: rarely(fc.constant("/"), 20),
  query: fc.record({
    kind: fc.constantFrom("schema", "schema", "none", "hostile", "unknown", "bytes"),
    hostile: fc.constantFrom("-1", "1.5", "abc", "", "99999999999999999999", "0x10", "1e3", "+1", "%00", "true",
                             "1&tail=2", "%ff", "2147483648", "tail"),
    bytes: fc.uint8Array({ maxLength: 16 }),
  }),
  body: fc.record({
    kind: fc.constantFrom("valid", "valid", "valid", "valid", "drop", "wrongType", "extra", "hugeNumber", "duplicate",
                          "broken", "bytes", "nonObject", "none", "wrongContentType"),
    pick: fc.nat(),
    anything: fc.anything({ maxDepth: 2, maxKeys: 3 }),
    oddNumber: fc.constantFrom(...oddNumbers),
    broken: fc.constantFrom(...brokenBodies),
    bytes: fc.uint8Array({ maxLength: 64 }),
    extraKey: fc.string({ unit: "binary-ascii", maxLength: 10 }),
  }),
  // field overrides that steer toward the agent's real objects
  image: fc.constantFrom("test", "test", "schema", "loopback", "loopback-odd", "local-missing"),
  imageOdd: fc.constantFrom("", "UPPER", "a b", "x:", "@sha256:", "x@sha256:abc", "../containers/json", "a//b", ":tag",
                            "x:" + "9".repeat(200), "%2e%2e", "-x", "x\u0000y", "\u00e9"),
  sleepCommand: fc.boolean(),
  upgrade: rarely(fc.constant("tcp"), 3),
});

// A value json-schema-faker makes from `schema` with `seed`; null when it cannot.
function fake(schema, seed) {
  try {
    return generateSync(generable(schema), { seed, maxDepth: 4, maxDefaultItems: 3 });
  } catch (e) {
    return null;
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// The string for one path parameter.
function paramValue(param, choice, opId, seed) {
  const kernels = [...known.kernels];
  switch (choice.kind) {
    case "known":
      if (param.name === "exec" && known.execs.length) return encodeURIComponent(known.execs[choice.pick % known.execs.length].exec);
      if (param.name === "id" && opId.endsWith("Device") && devices.length) return devices[choice.pick % devices.length];
      if (param.name === "id" && kernels.length) return encodeURIComponent(kernels[choice.pick % kernels.length]);
      return encodeURIComponent(String(fake(param.schema, seed) ?? "x"));
    case "schema":
      return encodeURIComponent(String(fake(param.schema, seed) ?? "x"));
    case "hostile":
      return choice.hostile;
    case "bytes":
      return encodeBytes(choice.bytes);
    case "unicode":
      return encodeBytes(Buffer.from(choice.unicode, "utf8"));
    case "empty":
      return "";
    case "slash":
      return (kernels[0] ?? "k") + "/" + choice.hostile;
  }
}

// The query string for `op`.
function queryString(op, q, seed) {
  const params = op.parameters.filter((p) => p.in === "query");
  switch (q.kind) {
    case "none":
      return "";
    case "unknown":
      return "?unknown=" + encodeURIComponent(q.hostile);
    case "bytes":
      return "?" + (params[0]?.name ?? "x") + "=" + encodeBytes(q.bytes);
    case "hostile":
      return params.length ? "?" + params.map((p) => `${p.name}=${encodeURIComponent(q.hostile)}`).join("&") : "?" + encodeURIComponent(q.hostile);
  }
  const parts = [];
  params.forEach((p, i) => {
    const value = fake(p.schema, seed + i);
    if (value !== null && (seed + i) % 3 !== 0) parts.push(`${p.name}=${encodeURIComponent(String(value))}`);
  });
  return parts.length ? "?" + parts.join("&") : "";
}

const loopbackImage = (rest) => `${args.registry}/${rest}`;
// Whether `body` (a create or pull request, parsed) may make the engine pull.
// (A "pull" that is not a string is refused as it is; only strings can name a policy.)
const mayPull = (op, body) => op.id === "pullImage" || (op.id === "createKernel" && isObject(body) && typeof body.pull === "string" && body.pull !== "none");

// Sets body.image as `c.image` says, and keeps exec and kernel bodies short-lived.
function steer(op, body, c) {
  if (!isObject(body)) return body;
  if (op.id === "createKernel" || op.id === "pullImage") {
    const schemaImage = typeof body.image === "string" ? body.image : "x";
    body.image = { test: args.image, schema: schemaImage, loopback: loopbackImage("fuzz/" + schemaImage.toLowerCase().replace(/[^a-z0-9]/g, "") + ":1"),
                   "loopback-odd": loopbackImage(c.imageOdd), "local-missing": "slotd-fuzz/missing:1" }[c.image];
    if (mayPull(op, body) && !isLoopback(body.image)) body.image = loopbackImage(body.image);
  }
  if (op.id === "createKernel") {
    if (c.sleepCommand) body.command = LONG_COMMAND;
    if (isObject(body.resources)) {
      // ask for little, so that a create that succeeds leaves room for the next
      if (typeof body.resources.cpu === "number") body.resources.cpu = 1;
      if (body.resources.mem !== undefined && c.body.pick % 2) body.resources.mem = "16m";
    }
    delete body.mounts;  // no mount-allow: always refused; kept rare below
    if (c.body.pick % 7 === 0) body.mounts = [{ source: "/tmp", target: "/mnt" }];
  }
  if (op.id === "exec") {
    if (typeof body.timeout_s === "number") body.timeout_s = Math.min(body.timeout_s, 3);
    const commands = [["true"], ["echo", "fuzz"], ["sh", "-c", "exit 3"], ["sh", "-c", "printf '\\377\\376'"], body.command];
    body.command = commands[c.body.pick % commands.length];
  }
  return body;
}

// A kernel's command that runs until stopped, and stops at once on SIGTERM
// (a bare sleep as PID 1 ignores it, and each stop would wait stop-timeout).
const LONG_COMMAND = ["sh", "-c", "trap 'exit 0' TERM; sleep 600 & wait"];

const isLoopback = (image) => typeof image === "string" && (image.startsWith("127.") || image.startsWith("localhost:") || image.startsWith("localhost/"));

// The body bytes and their Content-Type for `op`.
function bodyFor(op, c) {
  const b = c.body;
  let value = op.body ? steer(op, fake(op.body[0], c.jsfSeed), c) : null;
  if (!op.body && b.kind !== "broken" && b.kind !== "bytes") return { text: null };
  const keys = isObject(value) ? Object.keys(value) : [];
  const key = keys.length ? keys[b.pick % keys.length] : "image";
  let text;
  switch (b.kind) {
    case "valid":
    case "wrongContentType":
      text = JSON.stringify(value);
      break;
    case "drop":
      if (isObject(value)) delete value[key];
      text = JSON.stringify(value);
      break;
    case "wrongType":
      if (isObject(value)) value[key] = b.anything;
      else value = b.anything;
      text = JSON.stringify(value);
      break;
    case "extra":
      if (isObject(value)) value[b.extraKey || "x"] = b.anything;
      text = JSON.stringify(value);
      break;
    case "hugeNumber": {
      const numeric = keys.filter((k) => typeof value[k] === "number");
      if (isObject(value)) value[numeric.length ? numeric[b.pick % numeric.length] : key] = "\u0000NUMBER\u0000";
      text = JSON.stringify(value).replace('"\\u0000NUMBER\\u0000"', b.oddNumber);
      break;
    }
    case "duplicate": {
      // the key twice; the first with a value of another type or the same
      text = JSON.stringify(value);
      if (isObject(value) && text.length > 2) text = `{${JSON.stringify(key)}:${JSON.stringify(b.pick % 2 ? value[key] : b.anything)},${text.slice(1)}`;
      break;
    }
    case "broken":
      text = b.broken;
      break;
    case "bytes":
      return { bytes: Buffer.from(b.bytes), type: "application/json" };
    case "nonObject":
      text = JSON.stringify([value]);
      break;
    case "none":
      return { text: null };
  }
  return { text, type: b.kind === "wrongContentType" ? "text/plain" : "application/json" };
}

// One request: {op (the operation it was made for), method, target, headers, body (Buffer|null), transport}.
function build(c) {
  const op = operations[c.op];
  const method = c.wrongMethod ?? op.method;
  let i = 0;
  let path = op.pattern.replace(/\{(\w+)\}/g, (_, name) => {
    const param = op.parameters.find((p) => p.in === "path" && p.name === name);
    return paramValue(param, c.params[i++], op.id, c.jsfSeed + i);
  });
  path += c.trailingSlash ?? "";
  const target = path + queryString(op, c.query, c.jsfSeed);
  const headers = { Connection: "close" };
  if (c.transport === "tcp") {
    const auth = { token: `Bearer ${args.token}`, viewer: `Bearer ${args["viewer-token"]}`, lower: `bearer ${args.token}`,
                   wrong: "Bearer wrong", basic: "Basic Zm9vOmJhcg==", none: null }[c.auth];
    if (auth) headers.Authorization = auth;
  }
  if (op.id === "exec" && c.upgrade) {
    headers.Connection = "Upgrade";
    headers.Upgrade = c.upgrade;
  }
  const body = bodyFor(op, c);
  let bytes = body.bytes ?? (body.text === null ? null : Buffer.from(body.text, "utf8"));
  if (bytes) headers["Content-Type"] = body.type;
  return { op, method, target, headers, body: bytes, transport: c.transport };
}

// Why `req` must not be sent (a pull that could leave the loopback); null when it may.
function withheld(req) {
  if (req.method !== "POST" || !req.body) return null;
  const r = route(req.method, req.target.split("?")[0]);
  if (!r.op || (r.op.id !== "pullImage" && r.op.id !== "createKernel")) return null;
  const text = req.body.toString("utf8");
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  // every "image" value the agent could read, the last of duplicates included
  const images = [...text.matchAll(/"image"\s*:\s*("(?:[^"\\]|\\.)*")/g)].map((m) => { try { return JSON.parse(m[1]); } catch { return m[1]; } });
  if (isObject(parsed)) images.push(parsed.image);
  const pulls = r.op.id === "pullImage" || /"pull"\s*:\s*"(tag|digest)"/.test(text) || (isObject(parsed) && mayPull(r.op, parsed)) || /\\u00[67]/.test(text);
  if (!pulls) return null;
  // (an image that is not a string is refused as it is)
  const outside = images.filter((image) => typeof image === "string" && !isLoopback(image));
  return outside.length ? `it could pull ${JSON.stringify(outside[0])} from outside the loopback` : null;
}

// ---- Sending.

// Sends `req`; resolves to {status, headers, body (string)} or {error}.
function send(req, limitMs = 20000) {
  return new Promise((done) => {
    const options = { method: req.method, path: req.target, headers: { ...req.headers }, agent: false };
    if (req.transport === "unix") options.socketPath = args.socket;
    else Object.assign(options, { host: tcpHost, port: Number(tcpPort) });
    if (req.body) options.headers["Content-Length"] = req.body.length;
    let finished = false;
    const finish = (answer) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      done(answer);
    };
    const timer = setTimeout(() => { request.destroy(); finish({ error: `no answer within ${limitMs} ms` }); }, limitMs);
    let request;
    try {
      request = http.request(options);
    } catch (e) {
      clearTimeout(timer);
      return done({ unsendable: e.message });
    }
    request.on("upgrade", (res, socket) => {
      socket.destroy();
      finish({ status: res.statusCode, headers: res.headers, body: "" });
    });
    request.on("response", (res) => {
      const chunks = [];
      const type = res.headers["content-type"] ?? "";
      const streaming = type.startsWith("text/event-stream") || (type.startsWith("text/plain") && res.headers["transfer-encoding"] === "chunked");
      // a stream (events, logs that follow) is read briefly, then left
      if (streaming) setTimeout(() => { res.destroy(); finish({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString("utf8"), cut: true }); }, 100);
      res.on("data", (d) => chunks.push(d));
      res.on("end", () => finish({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", () => finish({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString("utf8"), cut: true }));
    });
    request.on("error", (e) => finish({ error: `${e.code ?? ""} ${e.message}`.trim() }));
    request.end(req.body ?? undefined);
  });
}

// ---- Holding an answer to the document.

// The 5xx answers the document gives a cause outside the agent: operation -> status -> codes.
const EXPECTED_5XX = {
  createKernel: { 503: ["draining", "unavailable"], 504: ["deadline_exceeded"] },
  pullImage: { 503: ["unavailable"], 504: ["deadline_exceeded"] },
  exec: { 504: ["deadline_exceeded"] },
};

// What is wrong with `answer` to `req` (empty when it fits).
function problemsOf(req, answer) {
  const problems = [];
  if (answer.error) return [`no answer: ${answer.error}`];
  const status = answer.status;
  const type = (answer.headers["content-type"] ?? "").split(";")[0].trim();
  let json;
  if (type === "application/json" && !answer.cut) {
    try {
      json = JSON.parse(answer.body);
    } catch {
      problems.push(`Content-Type application/json but the body is not JSON: ${answer.body.slice(0, 200)}`);
    }
  }
  const code = json?.error?.code;
  const r = route(req.method, req.target.split("?")[0]);
  const server = [400, 413, 414, 431];  // what the server may answer before routing
  const viewer = req.transport === "tcp" && req.headers.Authorization === `Bearer ${args["viewer-token"]}`;
  const authorized = req.transport === "unix" || viewer ||
                     /^bearer /i.test(req.headers.Authorization ?? "") && req.headers.Authorization.endsWith(` ${args.token}`);
  if (!authorized) server.push(401);
  if (!r.op) {
    const expected = r.allow ? 405 : 404;
    if (status !== expected && !server.includes(status)) problems.push(`status ${status} for a target that is no route (expected ${expected})`);
    if (status === 405 && !answer.headers.allow) problems.push("405 without an Allow header");
    if (status === 405 && r.allow && answer.headers.allow && answer.headers.allow.split(/,\s*/).sort().join() !== [...r.allow].sort().join())
      problems.push(`Allow: ${answer.headers.allow}, the document says ${r.allow.join(", ")}`);
    problems.push(...schemaProblems(json, type, "#/components/responses/BadRequest", status >= 400));
    if (status >= 500) problems.push(`5xx: ${status} ${code ?? ""}: ${json?.error?.message ?? answer.body.slice(0, 200)}`);
    return problems;
  }
  const op = r.op;
  // A viewer's credential on a route that needs more is 403, whatever else the request holds.
  if (viewer && (op.role === "operator" || op.role === "admin") && status !== 403 && !server.includes(status))
    problems.push(`status ${status} for a viewer on ${op.method} ${op.pattern}, which needs ${op.role} (expected 403)`);
  if (status === 403 && code === "forbidden" && !(viewer && op.role !== "viewer" && op.role !== "anyone"))
    problems.push(`403 forbidden on ${op.method} ${op.pattern} (role ${op.role}) for a caller that has the role`);
  const listed = op.responses[String(status)];
  if (!listed) {
    problems.push(`status ${status} is not listed for ${op.method} ${op.pattern}`);
  } else {
    const [response, pointer] = deref(listed, `${op.responsesPointer}/${status}`);
    for (const [name, header] of Object.entries(response.headers ?? {}))
      if (deref(header)[0].required && answer.headers[name.toLowerCase()] === undefined) problems.push(`the required header ${name} is missing`);
    if (status !== 101) {
      if (!response.content?.[type]) problems.push(`Content-Type "${answer.headers["content-type"] ?? ""}" is not listed for ${status}`);
      else if (type === "application/json") problems.push(...schemaProblems(json, type, pointer, false));
    }
  }
  if (status === 101 && answer.headers["x-slotd-exec-id"]) {
    const kernel = percentDecode(req.target.split("/")[3]);
    known.execs.push({ kernel, exec: answer.headers["x-slotd-exec-id"] });
  }
  if (status >= 500 && !(EXPECTED_5XX[op.id]?.[status] ?? []).includes(code))
    problems.push(`5xx: ${status} ${code ?? ""}: ${json?.error?.message ?? answer.body.slice(0, 200)}`);
  return problems;
}

// Problems of a JSON body against the response at `pointer` (an Error body when `error`).
function schemaProblems(json, type, pointer, error) {
  if (type !== "application/json" || json === undefined) return [];
  const validate = validatorAt(error ? "#/components/schemas/Error" : `${pointer}/content/application~1json/schema`);
  if (validate(json)) return [];
  return [`the body does not fit the document: ${ajv.errorsText(validate.errors)}; body: ${JSON.stringify(json).slice(0, 300)}`];
}

// Learns kernel ids from an answer.
function learn(req, answer) {
  const r = route(req.method, req.target.split("?")[0]);
  if (!r.op || !answer.body || answer.cut) return;
  let json;
  try {
    json = JSON.parse(answer.body);
  } catch {
    return;
  }
  if (r.op.id === "createKernel" && (answer.status === 201 || answer.status === 200)) {
    known.kernels.add(json.kernel_id);
    known.made.add(json.kernel_id);
  }
  if (r.op.id === "deleteKernel" && answer.status === 200) known.kernels.delete(json.kernel_id);
  if (r.op.id === "listKernels" && answer.status === 200) known.kernels = new Set(json.kernels.map((k) => k.kernel_id));
}

// ---- The events stream, open throughout.

function openEvents() {
  const state = { raw: "", status: 0, type: "" };
  const request = http.request({ host: tcpHost, port: Number(tcpPort), path: "/v1/events", agent: false,
                                 headers: { Authorization: `Bearer ${args.token}` } });
  request.on("response", (res) => {
    state.status = res.statusCode;
    state.type = res.headers["content-type"] ?? "";
    res.on("data", (d) => { state.raw += d.toString("utf8"); });
    res.on("error", () => {});
  });
  request.on("error", () => {});
  request.end();
  state.close = () => request.destroy();
  return state;
}

function eventProblems(events) {
  const problems = [];
  if (events.status !== 200) return [`GET /v1/events answered ${events.status}`];
  if (!events.type.startsWith("text/event-stream")) problems.push(`GET /v1/events Content-Type ${events.type}`);
  const validate = validatorAt("#/components/schemas/Event");
  const frames = events.raw.split("\n\n").slice(0, -1).filter((f) => !f.startsWith(":"));
  for (const frame of frames) {
    const name = /^event: (.*)$/m.exec(frame)?.[1];
    const data = /^data: (.*)$/m.exec(frame)?.[1];
    let json;
    try {
      json = JSON.parse(data);
    } catch {
      problems.push(`an event frame whose data is not JSON: ${frame.slice(0, 200)}`);
      continue;
    }
    if (json.type !== name) problems.push(`an event frame named ${name} with data of type ${json.type}`);
    if (!validate(json)) problems.push(`event ${name} does not fit Event: ${ajv.errorsText(validate.errors)}; ${data.slice(0, 300)}`);
  }
  return { problems, count: frames.length };
}

// ---- The run.

const printable = (req) => ({
  transport: req.transport,
  request: `${req.method} ${req.target}`,
  headers: req.headers,
  body: req.body === null ? null : /^[\x20-\x7e]*$/.test(req.body.toString("latin1")) ? req.body.toString("latin1") : { base64: req.body.toString("base64") },
});

async function call(method, target, body) {
  const req = { method, target, headers: { Connection: "close", "Content-Type": "application/json" }, body: body ? Buffer.from(JSON.stringify(body)) : null, transport: "unix" };
  const answer = await send(req, 30000);
  return { req, answer };
}

// Creates a kernel for path parameters to name (outside the count): the
// first, and another whenever the fuzzing has deleted every one it knew.
let aims = 0;
async function aim() {
  const id = `fuzz-aim-${aims++}`;
  await call("POST", "/v1/agent/undrain");
  const { answer } = await call("POST", "/v1/kernels", { kernel_id: id, image: args.image, command: LONG_COMMAND, resources: { cpu: 1, mem: "32m" } });
  if (answer.status !== 201) {
    console.error(`api_fuzz: creating ${id}: ${answer.status ?? ""} ${answer.body ?? answer.error}`);
    return false;
  }
  known.kernels.add(id);
  known.made.add(id);
  return true;
}

async function main() {
  console.log(`api_fuzz: seed ${seed}, at most ${runs} requests, no new one after ${timeLimitMs / 1000} s; ${operations.length} operations from ${args.doc}`);
  console.log(`api_fuzz: replay with --seed ${seed}`);
  const events = openEvents();
  if (!(await aim())) {
    console.error("api_fuzz: FAILED: cannot create the first kernel");
    return 1;
  }

  const choices = fc.sample(choicesArb, { seed, numRuns: runs });
  const failures = new Map();  // signature -> {count, index, req, answer, problems}
  const counts = new Map();    // "OP status" -> n
  const started = Date.now();
  let sent = 0, withheldCount = 0, unsendable = 0;
  for (let index = 0; index < choices.length; ++index) {
    if (Date.now() - started > timeLimitMs) break;
    if (!known.kernels.size && !(await aim())) {
      failures.set("no kernel", { count: 1, index, problem: "a kernel to aim at cannot be created any more" });
      break;
    }
    const req = build(choices[index]);
    const why = withheld(req);
    if (why) {
      withheldCount++;
      if (args.verbose) console.log(`#${index} withheld: ${why}`);
      continue;
    }
    const answer = await send(req);
    if (answer.unsendable) {
      unsendable++;
      continue;
    }
    sent++;
    learn(req, answer);
    const r = route(req.method, req.target.split("?")[0]);
    const label = `${r.op ? r.op.id : r.allow ? "(wrong-method)" : "(no-route)"} ${answer.status ?? "-"}`;
    counts.set(label, (counts.get(label) ?? 0) + 1);
    const problems = problemsOf(req, answer);
    if (args.verbose) console.log(`#${index} ${req.method} ${req.target.slice(0, 100)} -> ${answer.status ?? answer.error} ${problems.join("; ")}`);
    for (const problem of problems) {
      // one example per kind of problem: its operation, and its text without
      // the body, quoted values and numbers; for a 5xx, the last part of the message
      const text = problem.startsWith("5xx: ") ? problem.replace(/^(5xx: \d+ \w*).*: /, "$1: ") : problem.replace(/body: .*/, "");
      const signature = `${label}: ${text.replace(/"[^"]*"/g, '""').replace(/\d+/g, "N").slice(0, 200)}`;
      const seen = failures.get(signature);
      if (seen) seen.count++;
      else failures.set(signature, { count: 1, index, req, answer, problem });
    }
    if (answer.error) {
      // the agent may be gone: stop if /health does not answer
      const health = await call("GET", "/health");
      if (health.answer.error) {
        failures.set("agent gone", { count: 1, index, req, answer, problem: `the agent does not answer any more: ${health.answer.error}` });
        break;
      }
    }
  }
  const elapsed = ((Date.now() - started) / 1000).toFixed(1);

  // leave nothing behind: delete every kernel made, open the agent again
  await call("POST", "/v1/agent/undrain");
  const list = await call("GET", "/v1/kernels");
  const live = list.answer.status === 200 ? JSON.parse(list.answer.body).kernels.map((k) => k.kernel_id) : [...known.made];
  for (const id of live) await call("DELETE", `/v1/kernels/${encodeURIComponent(id)}`);
  events.close();
  const ev = eventProblems(events);
  for (const problem of ev.problems ?? ev) failures.set(problem, { count: 1, index: -1, problem });

  console.log(`api_fuzz: ${sent} requests in ${elapsed} s (${aims} kernel(s) made to aim at, ${withheldCount} withheld as possible pulls from outside the loopback, ${unsendable} not sendable); ${ev.count ?? 0} events`);
  const byOp = new Map();
  for (const [label, n] of [...counts].sort()) {
    const [opId, status] = label.split(" ");
    byOp.set(opId, [...(byOp.get(opId) ?? []), `${status}x${n}`]);
  }
  for (const [opId, statuses] of byOp) console.log(`  ${opId.padEnd(16)} ${statuses.join(" ")}`);
  const undriven = operations.filter((op) => !byOp.has(op.id)).map((op) => op.id);
  if (undriven.length) console.log(`api_fuzz: operations never reached: ${undriven.join(", ")}`);
  if (!failures.size) {
    console.log("api_fuzz: PASSED: every answer fits docs/openapi.yaml, no 5xx");
    return 0;
  }
  console.log(`api_fuzz: FAILED: ${failures.size} kind(s) of problem (seed ${seed}); one example each:`);
  for (const [signature, f] of failures) {
    console.log(`\n- ${f.problem} (${f.count}x)`);
    if (f.req) {
      console.log(`  request #${f.index}: ${JSON.stringify(printable(f.req))}`);
      console.log(`  answer: ${f.answer.status ?? f.answer.error} ${(f.answer.body ?? "").slice(0, 400)}`);
    }
  }
  return 1;
}

process.exitCode = await main();
