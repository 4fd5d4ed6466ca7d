package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
)

// checkBound bounds each doctor check.
const checkBound = 15 * time.Second

// check is one doctor check's outcome.
type check struct {
	Name   string  `json:"name"`
	OK     bool    `json:"ok"`
	Ms     float64 `json:"ms"`
	Detail string  `json:"detail,omitempty"`
	Fix    string  `json:"fix,omitempty"`
}

// checker runs the checks in order. The connection checks and the key
// check are prerequisites: once one fails, every later check is reported
// as not run (and failed). The quota and snapshot checks are independent
// of each other.
type checker struct {
	acct        *account
	each        func(check)
	checks      []check
	failed      string // the first failed prerequisite
	firstFailed string // the first failed check of any kind
	independent bool   // failures no longer stop later checks
}

// run times fn under checkBound. fn returns the detail, or an error and the
// fix hint.
func (c *checker) run(ctx context.Context, name string, fn func(ctx context.Context) (detail string, fix string, err error)) {
	var ck check
	if c.failed != "" {
		ck = check{Name: name, Detail: "not run: " + c.failed + " failed"}
	} else {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, checkBound)
		detail, fix, err := fn(cctx)
		cancel()
		ck = check{Name: name, OK: err == nil, Ms: ms(time.Since(start)), Detail: detail}
		if err != nil {
			ck.Detail, ck.Fix = clamp.Echo(err.Error()), fix
			if !c.independent {
				c.failed = name
			}
		}
	}
	if !ck.OK && c.firstFailed == "" {
		c.firstFailed = name
	}
	c.checks = append(c.checks, ck)
	if c.each != nil {
		c.each(ck)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// endpoint is the API URL's host and port.
func endpoint(apiURL string) (u *url.URL, host, port string, err error) {
	u, err = url.Parse(apiURL)
	if err != nil || u.Hostname() == "" {
		return nil, "", "", errors.New("apiUrl is not an absolute URL")
	}
	port = u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u, u.Hostname(), port, nil
}

// runChecks runs every check of the account, in order.
func (c *checker) runChecks(ctx context.Context) {
	u, host, port, err := endpoint(c.acct.apiURL())
	if err != nil {
		c.run(ctx, "API URL", func(context.Context) (string, string, error) {
			return "", "set apiUrl (DAYTONA_API_URL) to https://<host>/api", err
		})
		return
	}
	var addrs []string
	c.run(ctx, "DNS", func(ctx context.Context) (string, string, error) {
		if net.ParseIP(host) != nil {
			addrs = []string{host}
			return host + " is an IP address (no lookup)", "", nil
		}
		var err error
		addrs, err = net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return "", "check the host name in apiUrl (DAYTONA_API_URL) and this machine's DNS resolver", err
		}
		return host + " → " + strings.Join(addrs, ", "), "", nil
	})
	c.run(ctx, "TCP", func(ctx context.Context) (string, string, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			return "", "a firewall or proxy blocks outbound port " + port + "; the worker needs to reach it", err
		}
		defer conn.Close()
		return "connected to " + conn.RemoteAddr().String(), "", nil
	})
	c.run(ctx, "TLS", func(ctx context.Context) (string, string, error) {
		if u.Scheme != "https" {
			return "not used: " + u.Scheme + " URL (only for a local emulator)", "", nil
		}
		d := tls.Dialer{Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			return "", "the server's certificate is not trusted here; a TLS-inspecting proxy needs its CA in the system trust store", err
		}
		defer conn.Close()
		st := conn.(*tls.Conn).ConnectionState()
		detail := tls.VersionName(st.Version)
		if len(st.PeerCertificates) > 0 {
			detail += ", certificate valid until " + st.PeerCertificates[0].NotAfter.UTC().Format(time.DateOnly)
		}
		return detail, "", nil
	})
	c.run(ctx, "API key", func(ctx context.Context) (string, string, error) {
		page, _, err := c.acct.client.Sandboxes.ListPage(ctx, &daytona.ListOptions{Limit: 1})
		switch {
		case errors.Is(err, daytona.ErrUnauthorized), errors.Is(err, daytona.ErrForbidden):
			return "", "create an API key with sandbox permissions in the Daytona dashboard (Keys) and set it as apiKey or DAYTONA_API_KEY", err
		case err != nil:
			return "", "the URL answers but not as the Daytona API: apiUrl must end in /api", err
		}
		if len(page.Items) > 0 {
			c.acct.orgID = page.Items[0].OrganizationID
		}
		return "accepted", "", nil
	})
	c.independent = true
	c.run(ctx, "quota", func(ctx context.Context) (string, string, error) { return c.quota(ctx) })
	c.run(ctx, "snapshot/image", func(ctx context.Context) (string, string, error) { return c.source(ctx) })
}

// organization is the part of Daytona's Organization the doctor reads.
type organization struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	DefaultRegionID string `json:"defaultRegionId"`
	Suspended       bool   `json:"suspended"`
}

type regionUsage struct {
	RegionID           string  `json:"regionId"`
	TotalCPUQuota      float64 `json:"totalCpuQuota"`
	CurrentCPUUsage    float64 `json:"currentCpuUsage"`
	TotalMemoryQuota   float64 `json:"totalMemoryQuota"`
	CurrentMemoryUsage float64 `json:"currentMemoryUsage"`
	TotalDiskQuota     float64 `json:"totalDiskQuota"`
	CurrentDiskUsage   float64 `json:"currentDiskUsage"`
}

// quota reads the organization and its usage in the sandboxes' region.
func (c *checker) quota(ctx context.Context) (string, string, error) {
	const fix = "the key cannot read its organization: give it the organization's read permissions, or check the organization in the dashboard"
	var orgs []organization
	if err := c.acct.get(ctx, "/organizations", &orgs); err != nil {
		return "", fix, err
	}
	var org *organization
	for i := range orgs {
		if orgs[i].ID == c.acct.orgID || org == nil {
			org = &orgs[i]
		}
	}
	if org == nil {
		return "", fix, errors.New("the key belongs to no organization")
	}
	if org.Suspended {
		return "", "the organization is suspended: see the Daytona dashboard", fmt.Errorf("organization %s is suspended", org.Name)
	}
	var usage struct {
		RegionUsage []regionUsage `json:"regionUsage"`
	}
	if err := c.acct.get(ctx, "/organizations/"+url.PathEscape(org.ID)+"/usage", &usage); err != nil {
		return "", fix, err
	}
	region := c.acct.cfg.Target
	if region == "" {
		region = org.DefaultRegionID
	}
	if region == "" {
		return "", "set target (DAYTONA_TARGET) or a default region for the organization in the dashboard",
			fmt.Errorf("organization %s has no default region and no target is set", org.Name)
	}
	var known []string
	for _, r := range usage.RegionUsage {
		if r.RegionID != region {
			known = append(known, r.RegionID)
			continue
		}
		detail := fmt.Sprintf("organization %s, region %s: CPU %g/%g, memory %g/%g GiB, disk %g/%g GiB in use", org.Name, region,
			r.CurrentCPUUsage, r.TotalCPUQuota, r.CurrentMemoryUsage, r.TotalMemoryQuota, r.CurrentDiskUsage, r.TotalDiskQuota)
		if r.TotalCPUQuota > 0 && r.CurrentCPUUsage >= r.TotalCPUQuota {
			return "", "stop or delete sandboxes (daytona-worker sweep) or raise the organization's limits",
				errors.New(detail + ": no CPU left for a new sandbox")
		}
		return detail, "", nil
	}
	return "", "set target (DAYTONA_TARGET) to a region with quota: " + strings.Join(known, ", "),
		fmt.Errorf("organization %s has no quota in region %s", org.Name, region)
}

// source checks that the snapshot exists and is active. An image is built
// by Daytona at create time; only --create proves it.
func (c *checker) source(ctx context.Context) (string, string, error) {
	src, err := config.RuntimeCreateSource(c.acct.cfg)
	switch {
	case err != nil:
		return "", "fix the snapshot or image fields of the config", err
	case src.Image != "":
		return "image " + clamp.Echo(src.Image) + ": built by Daytona at the first create (run with --create to try it)", "", nil
	case src.Snapshot == "":
		return "no snapshot or image set: the organization's default snapshot", "", nil
	}
	fix := "create the snapshot in the Daytona dashboard (Snapshots) or set snapshot to an existing one"
	snap, _, err := c.acct.client.Snapshots.Get(ctx, src.Snapshot)
	if err != nil {
		return "", fix, err
	}
	if snap.State != daytona.SnapshotActive {
		reason := ""
		if snap.ErrorReason != nil {
			reason = ": " + *snap.ErrorReason
		}
		return "", "wait until the snapshot is active, or rebuild it in the dashboard",
			fmt.Errorf("snapshot %s is %s%s", clamp.Echo(src.Snapshot), clamp.Echo(string(snap.State)), clamp.Echo(reason))
	}
	return "snapshot " + clamp.Echo(src.Snapshot) + " is active", "", nil
}

// apiError is a non-2xx answer to one of the doctor's own reads. It names
// the path (never the URL's credentials) and the status.
type apiError struct {
	path   string
	status int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("GET %s: %d %s", e.path, e.status, http.StatusText(e.status))
}

// get reads path of the API as JSON, with the worker's HTTP client and
// headers. The organization and usage reads are the doctor's only ones
// outside the daytona client's route table.
func (a *account) get(ctx context.Context, path string, out any) error {
	key, err := config.ResolveAPIKey(a.cfg, nil)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(a.apiURL(), "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set(daytona.HeaderSource, daytona.DefaultSource)
	req.Header.Set("User-Agent", daytona.DefaultUserAgent)
	resp, err := a.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("GET %s: %w", path, ue.Err)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &apiError{path: path, status: resp.StatusCode}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: malformed answer: %w", path, err)
	}
	return nil
}
