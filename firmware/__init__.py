"""Board image build, flash and verify (built by another issue)."""
