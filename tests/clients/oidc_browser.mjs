// A scripted browser for the oidc-provider envtests: opens the URL it is
// given (an authorization request, or a device verification URI), keeps
// cookies, follows redirects, and submits each form it lands on the way a
// user who approves does — the sign-in form with `login=$OIDC_ACCOUNT`
// (default alice), the device code confirmation as offered (never its
// abort button). Stops on a page without a form: Steward's callback page,
// or the device flow's success page. Exits 0 when that page is a 2xx.
// With OIDC_STOP_AT=PREFIX it does not follow a redirect to an address that
// starts with PREFIX: it prints that address (what a user copies from the
// address bar for `--paste`) and exits 0.
//
// Usage: OIDC_ACCOUNT=bob [OIDC_STOP_AT=http://127.0.0.1:PORT/callback] node oidc_browser.mjs URL

const [start] = process.argv.slice(2);
const account = process.env.OIDC_ACCOUNT || 'alice';
const stopAt = process.env.OIDC_STOP_AT;
const jar = new Map();

const cookies = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
const keep = (response) => {
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const at = pair.indexOf('=');
    jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
  }
};

// The first POST form of `html`: its action and fields.
function form(html) {
  const found = html.match(/<form[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i);
  if (!found) return null;
  const action = (found[0].match(/action="([^"]*)"/) || [])[1] ?? '';
  const fields = new URLSearchParams();
  for (const input of found[1].matchAll(/<input[^>]*>/g)) {
    const name = (input[0].match(/name="([^"]*)"/) || [])[1];
    const value = (input[0].match(/value="([^"]*)"/) || [])[1] ?? '';
    if (!name) continue;
    fields.set(name, name === 'login' ? account : value);
  }
  return { action, fields };
}

let url = start;
let init = { method: 'GET' };
for (let step = 0; step < 40; step += 1) {
  const response = await fetch(url, {
    ...init,
    redirect: 'manual',
    headers: { ...(init.headers ?? {}), cookie: cookies() },
  });
  keep(response);
  if (response.status >= 300 && response.status < 400) {
    url = new URL(response.headers.get('location'), url).href;
    if (stopAt && url.startsWith(stopAt)) {
      console.log(url);
      process.exit(0);
    }
    init = { method: 'GET' };
    continue;
  }
  const html = await response.text();
  const next = response.ok ? form(html) : null;
  if (!next) {
    process.exit(response.ok ? 0 : 1);
  }
  url = new URL(next.action || url, url).href;
  init = {
    method: 'POST',
    body: next.fields.toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  };
}
console.error('oidc_browser: too many steps');
process.exit(1);
