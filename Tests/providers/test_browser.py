#!/usr/bin/env python3
"""A scripted "browser" for `vaultctl login --browser`, used by tests and the demo.

    test_browser.py URL

Plays the person at the provider's login page: asks the provider to log in the
test user (env TEST_USER, default "kari") — `test_user=` for the strict test
provider, `demo_user=` for vaultd's demo providers, a POSTed `sub` for
oidc-provider-mock — then follows the redirect to vaultd's loopback listener,
as a browser would. Env TEST_BROWSER_ACTION=cancel asks the provider to cancel
(`demo_cancel=1`). Writes the final page's status to stderr. Standard library only.
"""
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: test_browser.py URL", file=sys.stderr)
        return 2
    url = sys.argv[1]
    user = os.environ.get("TEST_USER", "kari")
    mode = os.environ.get("TEST_BROWSER_MODE", "auto")  # auto | query | post
    if os.environ.get("TEST_BROWSER_ACTION") == "cancel":
        url += "&demo_cancel=1"
        data = None
    elif mode == "post" or (mode == "auto" and "/oauth2/authorize" in url):
        data = urllib.parse.urlencode({"sub": user}).encode()
    else:
        url += "&" + urllib.parse.urlencode({"test_user": user, "demo_user": user})
        data = None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            print(f"test_browser: {response.status}", file=sys.stderr)
    except urllib.error.HTTPError as e:  # the loopback page may answer 400 for a failed login
        print(f"test_browser: {e.code}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 -- a browser shows errors, it does not crash
        print(f"test_browser: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
