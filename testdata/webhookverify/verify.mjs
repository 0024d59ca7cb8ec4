// verify.mjs checks one webhook delivery with two verifiers written by
// others, so that the Go tests learn whether receivers in the wild accept
// what the Service signs. webhook_node_test.go runs it.
//
// It reads from stdin a JSON object
//
//	{"secret": "...", "body": "<the exact raw body>",
//	 "headers": {"Name": "value", ...}, "now": 1700000000}
//
// and checks
//
//   - X-Service-Signature with @octokit/webhooks-methods verify(), the
//     GitHub scheme: "sha256=" and the hex HMAC-SHA256 of the body;
//   - webhook-id, webhook-timestamp and webhook-signature with the
//     standardwebhooks package, the Standard Webhooks reference library.
//
// "now" (Unix seconds) is optional: when given, the Standard Webhooks
// timestamp tolerance (5 minutes) is checked against it instead of the
// real clock, for deliveries signed by a Service on a fake clock.
//
// It prints {"octokit": bool, "standard": bool, "error"?: string} and exits
// 0 when both accept, 1 when either rejects, 2 when the input is unusable.
//
//	npm ci --prefix testdata/webhookverify
//	echo '{"secret": ..., "body": ..., "headers": {...}}' | node testdata/webhookverify/verify.mjs
import { verify as octokitVerify } from "@octokit/webhooks-methods";
import standardwebhooks from "standardwebhooks"; // CommonJS: take the default export

const { Webhook } = standardwebhooks;

const [result, code] = await main();
process.stdout.write(JSON.stringify(result) + "\n");
process.exitCode = code;

// main returns the result to print and the exit code.
async function main() {
  let input;
  try {
    input = await readInput();
  } catch (err) {
    return [{ octokit: false, standard: false, error: `input: ${err.message}` }, 2];
  }
  return check(input);
}

// readInput parses the JSON object on stdin.
async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  if (typeof input.secret !== "string" || typeof input.body !== "string") {
    throw new Error("secret and body must be strings");
  }
  if (input.now !== undefined && !Number.isInteger(input.now)) {
    throw new Error("now must be an integer number of Unix seconds");
  }
  return input;
}

// check returns the result of both verifiers and the exit code.
async function check(input) {
  // Header names are case-insensitive; both checks look them up in lower case.
  const headers = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    headers[name.toLowerCase()] = String(value);
  }

  const errors = [];

  let octokit = false;
  try {
    const signature = headers["x-service-signature"];
    if (!signature) {
      throw new Error("no X-Service-Signature header");
    }
    // The secret is a string: node:crypto keys the HMAC with its UTF-8 bytes.
    octokit = await octokitVerify(input.secret, input.body, signature);
    if (!octokit) {
      errors.push("octokit: X-Service-Signature does not match");
    }
  } catch (err) {
    errors.push(`octokit: ${err.message}`);
  }

  let standard = false;
  try {
    // Webhook(secret) would strip a "whsec_" prefix and base64-decode the
    // rest. Our key is the secret's UTF-8 bytes as they are, so pass those
    // bytes with format "raw". (A string with format "raw" would be turned
    // into bytes with charCodeAt, which is not UTF-8 beyond ASCII; a
    // Uint8Array is taken as the key unchanged.)
    const key = new TextEncoder().encode(input.secret);
    const wh = new Webhook(key, { format: "raw" });
    if (input.now !== undefined) {
      // verify() reads the clock with Date.now(); this process checks one
      // delivery and exits, so pinning it here touches nothing else.
      Date.now = () => input.now * 1000;
    }
    // verify() throws unless a v1 signature matches and the timestamp is
    // within tolerance; it then parses the body as JSON, which the envelope is.
    wh.verify(input.body, headers);
    standard = true;
  } catch (err) {
    errors.push(`standard: ${err.message}`);
  }

  const result = { octokit, standard };
  if (errors.length > 0) {
    result.error = errors.join("; ");
  }
  return [result, octokit && standard ? 0 : 1];
}
