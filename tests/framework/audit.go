package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// AuditUser is the audit log's name for a binary of the module running
// under its ServiceAccount in ManagerNamespace. The audit policy of
// hack/cluster.sh records the requests of every module binary, and nobody
// else's.
func AuditUser(id module.Identity) string { return id.User(ManagerNamespace) }

// AuditMark is a position in the audit log; requests after it can be counted.
type AuditMark int64

// MarkAudit returns the current end of the audit log.
func (c *Cluster) MarkAudit() (AuditMark, error) {
	st, err := os.Stat(c.AuditLogPath())
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return AuditMark(st.Size()), nil
}

// AuditCount is the number of requests by verb.
type AuditCount map[string]int

// Reads are get, list and watch requests.
func (a AuditCount) Reads() int { return a["get"] + a["list"] + a["watch"] }

// Writes are every other verb.
func (a AuditCount) Writes() int {
	n := 0
	for verb, count := range a {
		if verb != "get" && verb != "list" && verb != "watch" {
			n += count
		}
	}
	return n
}

// Total of all verbs.
func (a AuditCount) Total() int { return a.Reads() + a.Writes() }

// String lists the verbs, e.g. "create=12 get=3 patch=20".
func (a AuditCount) String() string {
	verbs := make([]string, 0, len(a))
	for v := range a {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	parts := make([]string, 0, len(verbs))
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s=%d", v, a[v]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// AuditCounts are the requests of each user.
type AuditCounts map[string]AuditCount

// AuditEvent is what the tests read of one audit log line (Metadata level).
type AuditEvent struct {
	Level   string `json:"level"`
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// CountAudit counts the requests logged after from per user, each request
// once whatever stages it logged. With users, the result has an entry for
// each of them (empty when it sent nothing) and no other; without, one for
// every user in the log.
func (c *Cluster) CountAudit(from AuditMark, users ...string) (AuditCounts, error) {
	counts := AuditCounts{}
	for _, u := range users {
		counts[u] = AuditCount{}
	}
	seen := map[string]bool{}
	err := c.scanAudit(from, func(e AuditEvent) {
		count, ok := counts[e.User.Username]
		if !ok && len(users) > 0 || seen[e.AuditID] {
			return
		}
		if !ok {
			count = AuditCount{}
			counts[e.User.Username] = count
		}
		seen[e.AuditID] = true
		count[e.Verb]++
	})
	return counts, err
}

// ReadAudit returns the audit events logged after from (a request that
// logged several stages appears once per stage).
func (c *Cluster) ReadAudit(from AuditMark) ([]AuditEvent, error) {
	var events []AuditEvent
	err := c.scanAudit(from, func(e AuditEvent) { events = append(events, e) })
	return events, err
}

// scanAudit calls fn for each complete line after from. A missing log is
// an error: the cluster audits every module binary, so counting nothing
// would hide a broken setup.
func (c *Cluster) scanAudit(from AuditMark, fn func(AuditEvent)) error {
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(int64(from), io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line still being written
		}
		fn(e)
	}
	return sc.Err()
}
