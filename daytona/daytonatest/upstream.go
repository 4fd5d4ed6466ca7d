package daytonatest

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// WithToolboxUpstream sends every sandbox's toolbox calls to a real
// toolbox daemon at base (an http URL on loopback), so the worker's exec
// and sync run against Daytona's own daemon while the emulator keeps the
// control plane, the request log, latency and faults
// (docs/emulator.md#a-real-daemon-behind-the-emulator). One daemon serves
// every sandbox: their sessions and files share it. Routes the emulator
// does not know are answered 404 as before. A base that is not a loopback
// http URL makes every toolbox call fail with 502.
func WithToolboxUpstream(base string) Option { return func(c *config) { c.upstream = base } }

// upstreamProxy is the reverse proxy of WithToolboxUpstream (nil if unset
// or invalid). It sends the route path relative to the sandbox.
func (s *Server) upstreamProxy() *httputil.ReverseProxy {
	s.upstreamOnce.Do(func() {
		u, err := url.Parse(s.cfg.upstream)
		if s.cfg.upstream == "" {
			return
		}
		if err != nil || u.Scheme != "http" || !loopbackHost(u.Hostname()) {
			return
		}
		s.upstream = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				rel := pr.In.URL.Path
				if _, rest, ok := strings.Cut(strings.TrimPrefix(rel, ToolboxPrefix+"/"), "/"); ok {
					rel = "/" + rest
				}
				pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
				pr.Out.URL.Path = strings.TrimSuffix(u.Path, "/") + rel
				pr.Out.URL.RawPath = ""
				pr.Out.Host = u.Host
				pr.Out.Header.Del("Authorization")
				pr.Out.Header.Del("X-Daytona-Preview-Token")
			},
		}
	})
	return s.upstream
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// forward serves a toolbox call from the upstream daemon; it reports
// false when there is none.
func (c *call) forward() bool {
	if c.s.cfg.upstream == "" {
		return false
	}
	p := c.s.upstreamProxy()
	if p == nil {
		writeToolboxError(c.w, c.r, http.StatusBadGateway, "toolbox upstream is not a loopback http URL")
		return true
	}
	p.ServeHTTP(c.w, c.r)
	return true
}
