/**
 * The rendered page as the renderer takes it once it settled: its HTML, title, URL and meta refresh.
 * @returns {{html: string, title: string | null, url: string, refresh: string | null}}
 */
function capture() {
  const m = document.querySelector('meta[http-equiv="refresh" i]');
  return {html: document.documentElement ? document.documentElement.outerHTML : "",
          title: document.title || null, url: location.href, refresh: m ? m.getAttribute("content") : null};
}
