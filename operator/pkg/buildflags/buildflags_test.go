package buildflags

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args []string
		want Flags
	}{
		{Split("--insecure,--skip-tls-verify,--skip-unused-stages,--log-format=text,--cache=true,--use-new-run,--compressed-caching=false"),
			Flags{Insecure: true, SkipTLSVerify: true, Cache: true,
				Ignored: []string{"--skip-unused-stages", "--log-format=text", "--use-new-run", "--compressed-caching=false"}}},
		{Split(Default), Flags{Insecure: true, SkipTLSVerify: true, Cache: true}},
		{nil, Flags{Cache: true}},
		{[]string{"--cache=false", "--insecure=false", " --skip-tls-verify "}, Flags{SkipTLSVerify: true}},
		{[]string{"--insecure-registry=my.registry", "--cache=maybe"}, Flags{Cache: true, Ignored: []string{"--insecure-registry=my.registry", "--cache=maybe"}}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Parse(tt.args), "%v", tt.args)
	}
}

func TestSplit(t *testing.T) {
	assert.Equal(t, []string{"--a", "--b=1"}, Split(" --a, ,--b=1,"))
	assert.Empty(t, Split(""))
}
