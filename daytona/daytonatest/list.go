package daytonatest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// listFilter holds the GET /sandbox filters the emulator honours.
type listFilter struct {
	labels         map[string]string
	states         map[string]bool
	idPrefix       string
	namePrefix     string
	includeErrored bool
}

func parseListFilter(q url.Values) (listFilter, string) {
	f := listFilter{idPrefix: strings.ToLower(q.Get("id")), namePrefix: strings.ToLower(q.Get("name"))}
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &f.labels); err != nil {
			return f, "Invalid labels JSON format"
		}
	}
	states := append(q["states"], q["states[]"]...)
	if len(states) > 0 {
		f.states = map[string]bool{}
		for _, st := range states {
			for _, p := range strings.Split(st, ",") {
				f.states[p] = true
			}
		}
	}
	f.includeErrored = q.Get("includeErroredDeleted") == "true"
	return f, ""
}

func (f listFilter) matchLocked(sb *sandbox) bool {
	if sb.state == StateDestroyed {
		return false
	}
	if (sb.state == StateError || sb.state == StateBuildFailed) && sb.desired == StateDestroyed && !f.includeErrored {
		return false
	}
	for k, v := range f.labels {
		if got, ok := sb.labels[k]; !ok || got != v {
			return false
		}
	}
	if f.states != nil && !f.states[sb.state] {
		return false
	}
	if f.idPrefix != "" && !strings.HasPrefix(strings.ToLower(sb.id), f.idPrefix) {
		return false
	}
	if f.namePrefix != "" && !strings.HasPrefix(strings.ToLower(sb.name), f.namePrefix) {
		return false
	}
	return true
}

func parseLimit(q url.Values) (int, bool) {
	limit := 100
	if l := q.Get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 1 || v > 200 {
			return 0, false
		}
		limit = v
	}
	return limit, true
}

// cursorKey is what a list cursor encodes: the sort key and id of the last
// item served (keyset pagination, stable under inserts and deletes).
type cursorKey struct {
	S  string  `json:"s,omitempty"`
	N  float64 `json:"n,omitempty"`
	ID string  `json:"id"`
}

func sortKeyLocked(sb *sandbox, field string) cursorKey {
	k := cursorKey{ID: sb.id}
	switch field {
	case "name":
		k.S = sb.name
	case "cpu":
		k.N = float64(sb.cpu)
	case "memoryGib":
		k.N = float64(sb.memory)
	case "diskGib":
		k.N = float64(sb.disk)
	case "createdAt":
		k.N = float64(sb.createdAt.UnixNano())
	default:
		k.N = float64(sb.lastActivity.UnixNano())
	}
	return k
}

func lessKey(a, b cursorKey) bool {
	if a.S != b.S {
		return a.S < b.S
	}
	if a.N != b.N {
		return a.N < b.N
	}
	return a.ID < b.ID
}

// listQuery parses what both listings take, the filters and the page
// size, and answers 400 (ok false) when they are invalid.
func (c *call) listQuery() (q url.Values, f listFilter, limit int, ok bool) {
	q = c.r.URL.Query()
	f, msg := parseListFilter(q)
	if msg != "" {
		c.apiErr(http.StatusBadRequest, msg)
		return q, f, 0, false
	}
	if limit, ok = parseLimit(q); !ok {
		c.apiErr(http.StatusBadRequest, "limit must not be greater than 200, limit must not be less than 1")
	}
	if c.fault != nil && c.fault.ListIgnoresLabels {
		f.labels = nil
	}
	return q, f, limit, ok
}

// apiList is the cursor-paginated listing of list items (no env, volumes
// or build info).
func apiList(c *call) {
	q, f, limit, ok := c.listQuery()
	if !ok {
		return
	}
	field := q.Get("sort")
	switch field {
	case "", "lastActivityAt":
		field = "lastActivityAt"
	case "name", "cpu", "memoryGib", "diskGib", "createdAt":
	default:
		c.apiErr(http.StatusBadRequest, "sort must be one of the following values: name, cpu, memoryGib, diskGib, lastActivityAt, createdAt")
		return
	}
	desc := q.Get("order") != "asc"
	var after *cursorKey
	if cur := q.Get("cursor"); cur != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cur)
		var k cursorKey
		if err != nil || json.Unmarshal(raw, &k) != nil || k.ID == "" {
			c.apiErr(http.StatusBadRequest, "Invalid cursor")
			return
		}
		after = &k
	}
	s := c.s
	tb := s.baseFor(c.r) + ToolboxPrefix
	type item struct {
		k cursorKey
		d sandboxListItem
	}
	var items []item
	s.mu.Lock()
	for _, id := range s.order {
		sb := s.sandboxes[id]
		if !f.matchLocked(sb) {
			continue
		}
		items = append(items, item{sortKeyLocked(sb, field), sb.listItemLocked(tb)})
	}
	s.mu.Unlock()
	sort.Slice(items, func(i, j int) bool {
		if desc {
			return lessKey(items[j].k, items[i].k)
		}
		return lessKey(items[i].k, items[j].k)
	})
	start := 0
	if after != nil {
		start = len(items)
		for i, it := range items {
			beyond := lessKey(*after, it.k)
			if desc {
				beyond = lessKey(it.k, *after)
			}
			if beyond {
				start = i
				break
			}
		}
	}
	end := start + limit
	var next *string
	if end < len(items) {
		raw, _ := json.Marshal(items[end-1].k)
		cur := base64.RawURLEncoding.EncodeToString(raw)
		next = &cur
	} else {
		end = len(items)
	}
	page := make([]sandboxListItem, 0, end-start)
	for _, it := range items[start:end] {
		page = append(page, it.d)
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"items": page, "nextCursor": next})
}

// apiListPaginated is the deprecated page/limit listing (full DTOs).
func apiListPaginated(c *call) {
	q, f, limit, ok := c.listQuery()
	if !ok {
		return
	}
	page := 1
	if p := q.Get("page"); p != "" {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			c.apiErr(http.StatusBadRequest, "page must not be less than 1")
			return
		}
		page = v
	}
	s := c.s
	tb := s.baseFor(c.r) + ToolboxPrefix
	var all []sandboxDTO
	s.mu.Lock()
	// Default sort createdAt desc: newest first.
	for i := len(s.order) - 1; i >= 0; i-- {
		sb := s.sandboxes[s.order[i]]
		if f.matchLocked(sb) {
			all = append(all, sb.dtoLocked(tb))
		}
	}
	s.mu.Unlock()
	total := len(all)
	from := (page - 1) * limit
	if from > total {
		from = total
	}
	to := from + limit
	if to > total {
		to = total
	}
	pages := (total + limit - 1) / limit
	writeJSON(c.w, http.StatusOK, map[string]any{"items": append([]sandboxDTO{}, all[from:to]...), "total": total, "page": page, "totalPages": pages})
}
