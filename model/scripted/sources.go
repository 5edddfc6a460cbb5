package scripted

import (
	"strconv"
	"strings"

	"github.com/conclave-ai/conclave/model"
)

// sourceDoc is one canonical source of the scripted search tool. Its URL
// is in normal form: https, lower-case host, no port, no fragment, no
// credentials, no trailing slash and the query sorted by key.
type sourceDoc struct {
	host, path string
	query      [2]string // "k=v" pairs, sorted by key
	topic      string
}

// sourcePool is the read-only table of the sources SearchSources draws on.
var sourcePool = [...]sourceDoc{
	{"example.org", "/energy/report", [2]string{"a=1", "b=2"}, "energy report"},
	{"example.com", "/history/timeline", [2]string{"era=modern", "page=3"}, "history timeline"},
	{"data.example.net", "/markets/prices", [2]string{"region=eu", "year=2024"}, "market prices"},
	{"example.org", "/climate/summary", [2]string{"lang=en", "v=2"}, "climate summary"},
	{"research.example.com", "/networks/paper", [2]string{"id=42", "rev=7"}, "network research"},
	{"example.net", "/health/study", [2]string{"cohort=b", "n=1200"}, "health study"},
	{"archive.example.org", "/rivers/atlas", [2]string{"map=delta", "scale=5"}, "river atlas"},
	{"example.com", "/policy/brief", [2]string{"issue=9", "topic=water"}, "policy brief"},
}

// sourceVariants is the number of spellings render knows.
const sourceVariants = 7

// render spells source d in variant v (0 <= v < sourceVariants): 0 is the
// canonical URL; 1 upper-cases the scheme and host; 2 adds the default
// port :443; 3 adds a #fragment; 4 reverses the query; 5 adds a trailing
// slash to the path; 6 adds "user:pw@" credentials. Every variant
// normalises back to the canonical URL.
func (d *sourceDoc) render(v int) string {
	scheme, host, path := "https://", d.host, d.path
	query, fragment := d.query[0]+"&"+d.query[1], ""
	switch v {
	case 1:
		scheme, host = "HTTPS://", strings.ToUpper(host)
	case 2:
		host += ":443"
	case 3:
		fragment = "#section-" + strconv.Itoa(len(d.topic)%9+1)
	case 4:
		query = d.query[1] + "&" + d.query[0]
	case 5:
		path += "/"
	case 6:
		host = "user:pw@" + host
	}
	return scheme + host + path + "?" + query + fragment
}

// SearchSources returns the sources the search tool's result for query
// draws on: two distinct sources of a fixed pool of eight, chosen by a
// hash of the query. Each URL is spelled in one of seven variants chosen
// by a hash of the query and the source — the canonical URL, an
// upper-case scheme and host, an explicit :443, a #fragment, the query
// reversed, a trailing slash on the path, or "user:pw@" credentials — so
// that one source appears spelled differently across queries, while every
// spelling normalises (lower-case scheme and host, default port, fragment
// and credentials dropped, query sorted, trailing slash stripped) to the
// source's canonical URL. The title of the k-th source of the pool
// (1-based) is "Source <k>: <topic>" whatever the spelling. The result
// depends on query alone.
func SearchSources(query string) []model.Source {
	h := splitmix64(uint64(newHash(0).str("sources").str(query)))
	n := uint64(len(sourcePool))
	first := h % n
	second := (first + 1 + (h>>8)%(n-1)) % n
	out := make([]model.Source, 0, 2)
	for _, i := range [2]uint64{first, second} {
		d := &sourcePool[i]
		v := splitmix64(uint64(newHash(0).str("spelling").str(query).int(int64(i)))) % sourceVariants
		out = append(out, model.Source{URL: d.render(int(v)), Title: "Source " + strconv.Itoa(int(i)+1) + ": " + d.topic})
	}
	return out
}
