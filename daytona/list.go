package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"strconv"
)

// ListOptions filters GET /sandbox (docs/daytona.md#list).
type ListOptions struct {
	// Labels: every key must exist with exactly this value.
	Labels map[string]string
	// States restricts the states (repeated query parameter).
	States []SandboxState
	// Name is a case-insensitive name prefix.
	Name string
	// Limit is the page size, 1-200 (default 100; List pages with 200).
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
	// IncludeDestroying keeps sandboxes whose desiredState is destroyed in
	// the results of ListAll/All (they are dropped by default).
	IncludeDestroying bool
}

// SandboxPage is one page of GET /sandbox.
type SandboxPage struct {
	Items      []Sandbox `json:"items"`
	NextCursor *string   `json:"nextCursor"`
}

// ListPage fetches one page, unfiltered: the caller sees exactly what the
// server returned (including sandboxes being destroyed).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/GET/sandbox
func (s *SandboxesService) ListPage(ctx context.Context, opts *ListOptions) (*SandboxPage, *Response, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	q := url.Values{}
	if len(opts.Labels) > 0 {
		b, _ := json.Marshal(opts.Labels)
		q.Set("labels", string(b))
	}
	for _, st := range opts.States {
		q.Add("states", string(st))
	}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	if opts.Limit < 0 || opts.Limit > 200 {
		return nil, nil, fmt.Errorf("%w: list limit must be 1-200", ErrInvalidArgument)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	page := new(SandboxPage)
	r, err := s.client.do(ctx, &call{rt: rListSandboxes, query: q}, page)
	if err != nil {
		return nil, r, err
	}
	return page, r, nil
}

// maxListPages stops a server that keeps returning cursors.
const maxListPages = 10000

// All iterates over every sandbox matching opts, following cursors, and
// skips sandboxes being destroyed unless opts.IncludeDestroying. It stops at
// the first error (yielded with a nil sandbox) or a repeated cursor.
func (s *SandboxesService) All(ctx context.Context, opts *ListOptions) iter.Seq2[*Sandbox, error] {
	return func(yield func(*Sandbox, error) bool) {
		o := ListOptions{Limit: 200}
		if opts != nil {
			o = *opts
			if o.Limit == 0 {
				o.Limit = 200
			}
		}
		seen := map[string]bool{}
		for range maxListPages {
			page, _, err := s.ListPage(ctx, &o)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Items {
				sb := &page.Items[i]
				if sb.Destroying() && !o.IncludeDestroying {
					continue
				}
				if !yield(sb, nil) {
					return
				}
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			if seen[*page.NextCursor] {
				yield(nil, fmt.Errorf("%w: %s: cursor repeated", ErrMalformedResponse, rListSandboxes))
				return
			}
			seen[*page.NextCursor] = true
			o.Cursor = *page.NextCursor
		}
		yield(nil, fmt.Errorf("%w: %s: more than %d pages", ErrMalformedResponse, rListSandboxes, maxListPages))
	}
}

// ListAll collects [SandboxesService.All] into a slice.
func (s *SandboxesService) ListAll(ctx context.Context, opts *ListOptions) ([]Sandbox, error) {
	var out []Sandbox
	for sb, err := range s.All(ctx, opts) {
		if err != nil {
			return nil, err
		}
		out = append(out, *sb)
	}
	return out, nil
}
