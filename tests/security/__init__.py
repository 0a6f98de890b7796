"""Security: no code from job data, no password in any output, AUTH, ACL and TLS end to end."""
