package modelrouters

import "testing"

func TestRouterDialRefusesMetadataAddresses(t *testing.T) {
	tests := []struct {
		address string
		refused bool
	}{
		{"169.254.169.254:80", true},
		{"[fd00:ec2::254]:80", true},
		{"[fe80::1]:443", true},
		{"[::ffff:169.254.169.254]:80", true},
		{"104.18.2.115:443", false},
		{"127.0.0.1:8080", false},
	}
	for _, tt := range tests {
		if err := refuseForbiddenAddr("tcp", tt.address, nil); (err != nil) != tt.refused {
			t.Errorf("%s: got %v, want refused %v", tt.address, err, tt.refused)
		}
	}
}
