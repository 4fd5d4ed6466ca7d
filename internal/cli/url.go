package cli

import "net/url"

// ShownURL is an API URL as a command prints it: without user info, query
// or fragment, where a credential could hide.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
