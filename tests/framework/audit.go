package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

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

type auditEvent struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
}

// CountAudit counts the requests of user logged after from (each request
// once, whatever stages it logged).
func (c *Cluster) CountAudit(from AuditMark, user string) (AuditCount, error) {
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(int64(from), io.SeekStart); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	count := AuditCount{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line still being written
		}
		if e.User.Username != user || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		count[e.Verb]++
	}
	return count, sc.Err()
}

// ManagerUser is the audit user name of the manager's ServiceAccount.
const ManagerUser = "system:serviceaccount:" + ManagerNamespace + ":" + ManagerServiceAccount
