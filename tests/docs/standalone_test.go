package docs

import (
	"bytes"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

var (
	// outsideRef is a path into a folder beside the repository, which a
	// reader of the repository alone cannot open.
	outsideRef = regexp.MustCompile(`\.\./(?:\.\./)*shared\b`)
	// sectionNumber is a numbered section of some other document: a section
	// sign and a number.
	sectionNumber = regexp.MustCompile(`§\s*\d`)
	// docCitation is a page of docs/ named from the root, with its anchor.
	docCitation = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]+\.md(?:#[A-Za-z0-9_-]+)?`)
)

// trackedFiles are the repository's tracked text files, relative to the
// root, with their contents.
func trackedFiles(t *testing.T) map[string]string {
	t.Helper()
	root := repo.MustRoot()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files in %s", root)
	files := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		require.NoError(t, err)
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		files[name] = string(data)
	}
	require.NotEmpty(t, files)
	return files
}

// comments are the comment texts of a tracked file: a Go file's comments,
// and the lines of other files (YAML, shell, scripts) that start with # or
// //. Markdown pages link their pages relatively (TestRelativeLinksResolve).
func comments(t *testing.T, name, text string) []string {
	t.Helper()
	switch {
	case strings.HasSuffix(name, ".md"):
		return nil
	case strings.HasSuffix(name, ".go"):
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(name, -1, len(text)), []byte(text), nil, scanner.ScanComments)
		var out []string
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.COMMENT {
				out = append(out, lit)
			}
		}
		require.Zero(t, s.ErrorCount, "%s: scanning the Go file", name)
		return out
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "#") || strings.HasPrefix(l, "//") {
			out = append(out, l)
		}
	}
	return out
}

// The repository stands alone: no file points into a folder beside it or
// at a numbered section of a document that is not in it, and every page
// of docs/ a comment cites from the root (as code comments cite
// docs/contributor pages) exists, with the heading its #anchor names.
func TestRepositoryStandsAlone(t *testing.T) {
	files := trackedFiles(t)
	pagesByPath := map[string]Page{}
	cited := 0
	for name, text := range files {
		for i, line := range strings.Split(text, "\n") {
			if m := outsideRef.FindString(line); m != "" {
				t.Errorf("%s:%d points at %q, outside the repository: write the fact into docs/contributor and cite that page", name, i+1, m)
			}
			if m := sectionNumber.FindString(line); m != "" {
				t.Errorf("%s:%d cites a section number (%q) of a document the repository does not hold: cite a docs/contributor page and its heading, or state the fact", name, i+1, m)
			}
		}
		for _, comment := range comments(t, name, text) {
			for _, c := range docCitation.FindAllString(comment, -1) {
				cited++
				file, anchor, _ := strings.Cut(c, "#")
				if _, ok := files[file]; !ok {
					t.Errorf("%s: a comment cites %s, which is no tracked file", name, file)
					continue
				}
				if anchor == "" {
					continue
				}
				p, ok := pagesByPath[file]
				if !ok {
					p = Page{Path: file, Text: files[file]}
					pagesByPath[file] = p
				}
				if !anchors(p)[anchor] {
					t.Errorf("%s: a comment cites %s, but %s has no heading with the anchor #%s", name, c, file, anchor)
				}
			}
		}
	}
	assert.NotZero(t, cited, "the code cites pages of docs/contributor")
}
