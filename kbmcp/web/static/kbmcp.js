// kbmcp's page: the bearer token, and nothing else htmx does not do.
//
// With tokens, every request needs `Authorization: Bearer <secret>`. A plain link or form
// cannot carry a header, so the page navigates with htmx (hx-boost on <body>): this file adds
// the header to each of its requests. The secret is kept in this tab's sessionStorage (never a
// cookie, so another site cannot make the browser send it: no CSRF surface) and is gone when
// the tab closes. Without tokens (the local owner, loopback only) no header is needed and the
// page also works as plain links and forms.
(function () {
  "use strict";

  var KEY = "kbmcp.token";

  function storedToken() {
    try {
      return window.sessionStorage.getItem(KEY);
    } catch (error) {
      return null; // storage disabled: the page asks again
    }
  }

  function forgetToken() {
    try {
      window.sessionStorage.removeItem(KEY);
    } catch (error) {
      // nothing stored
    }
  }

  // Every htmx request (links, forms, history restores) carries the token when there is one.
  document.addEventListener("htmx:configRequest", function (event) {
    var secret = storedToken();
    if (secret) {
      event.detail.headers["Authorization"] = "Bearer " + secret;
    }
  });
  // Going back to a page htmx keeps no copy of (historyCacheSize 0: no page text is written
  // to localStorage) loads it again with its own request, opened before this event.
  document.addEventListener("htmx:historyCacheMiss", function (event) {
    var secret = storedToken();
    if (secret) {
      event.detail.xhr.setRequestHeader("Authorization", "Bearer " + secret);
    }
  });

  // The page at this address, loaded again with the token, in place of the sign-in page.
  function loadWithToken() {
    window.htmx.ajax("GET", window.location.pathname + window.location.search, {
      target: "body",
      swap: "innerHTML",
    });
  }

  function authState() {
    var main = document.getElementById("main");
    return main ? main.getAttribute("data-kbmcp-auth") : null;
  }

  function scrollToAnchor() {
    var name = window.location.hash.slice(1);
    var target = name ? document.getElementById(name) : null;
    if (target) {
      target.scrollIntoView({ block: "center" });
    }
  }

  // After each page arrives: a refused token is dropped (the sign-in form shows why), and the
  // marked passage of a reader is scrolled to.
  function settle() {
    if (authState() === "refused") {
      forgetToken();
    }
    scrollToAnchor();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "sign-in") {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    var secret = form.elements.token.value.trim();
    if (!secret) {
      return;
    }
    try {
      window.sessionStorage.setItem(KEY, secret);
    } catch (error) {
      return; // no storage: nothing to send the token from
    }
    loadWithToken();
  }, true);

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-kbmcp-sign-out]") : null;
    if (!button) {
      return;
    }
    event.preventDefault();
    forgetToken();
    window.location.assign("/");
  });

  document.addEventListener("htmx:afterSettle", settle);
  document.addEventListener("DOMContentLoaded", function () {
    // A full page load (a typed address, a reload, a bookmark) carries no header: the server
    // answers with the sign-in page, and the token of this tab, if any, loads the real one.
    if (authState() === "required" && storedToken()) {
      loadWithToken();
      return;
    }
    settle();
  });
})();
