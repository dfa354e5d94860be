"""service.py - the small web service of README's tutorial.

GET /report?user=N answers from a user's report, built and cached on the
first request: their ten smallest orders, as JSON.
It has two faults on purpose, the two the tutorial finds with perfd:
- rank_orders() sorts by insertion into a list, O(n^2) in the orders, so
  every request burns CPU in Python;
- render_report() caches each report under a key that holds the time of the
  request, so no key is ever asked for twice and the cache only grows.
fix.patch is the change that removes both.

Run:  python3 service.py [PORT]     (default 8080; load.py sends it requests)
"""
import http.server
import json
import sys
import time
import urllib.parse

ORDERS_PER_USER = 1500

# Rendered reports by (user, time of the request): never evicted.
CACHE = {}


def load_orders(user):
    """The user's orders (made up: amounts in cents)."""
    return [(user * 7919 + i * 104729) % 100000 for i in range(ORDERS_PER_USER)]


def rank_orders(orders):
    """The orders from the smallest amount to the largest."""
    ranked = []
    for amount in orders:
        i = 0
        while i < len(ranked) and ranked[i] < amount:
            i += 1
        ranked.insert(i, amount)
    return ranked


def render_report(user):
    key = (user, time.time())
    if key not in CACHE:
        ranked = rank_orders(load_orders(user))
        CACHE[key] = {"user": user,
                      "orders": [{"rank": r, "cents": c, "note": f"order {r} of user {user}"}
                                 for r, c in enumerate(ranked)]}
    return CACHE[key]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path != "/report":
            self.send_error(404)
            return
        user = int(urllib.parse.parse_qs(url.query).get("user", ["0"])[0])
        report = render_report(user)
        body = json.dumps({"user": user, "smallest": report["orders"][:10]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
