package netguard

import (
	"net/netip"
	"testing"
)

func TestPublicAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "0.1.2.3": false, "192.0.0.8": false, "198.18.0.1": false, "240.0.0.1": false,
		"255.255.255.255": false, "224.0.0.1": false, "::1": false, "::": false, "::ffff:127.0.0.1": false,
		"::127.0.0.1": false, "fe80::1": false, "fc00::1": false, "fd12::1": false, "fec0::1": false, "ff02::1": false,
		"64:ff9b::a00:1": false, "64:ff9b:1::1": false, "2002:7f00:1::1": false, "2001:0:4136:e378::1": false, "2001:db8::1": false,
	} {
		ip := netip.MustParseAddr(addr).Unmap()
		if got := Public(ip); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}
