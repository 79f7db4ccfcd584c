# make install / uninstall: the binary, the systemd unit and the man page; and their tests
# (man-lint, install-check), which `make test` runs. Included by the Makefile.
#   make install PREFIX=/usr/local DESTDIR=      (the defaults)
# SBINDIR, SYSTEMDUNITDIR and MANDIR follow PREFIX unless given; the unit's ExecStart is
# written for SBINDIR when it is installed, so it names the gpumem that was installed.

PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
MANDIR ?= $(PREFIX)/share/man
INSTALL ?= install

.PHONY: install uninstall man-lint install-check

# The unit is generated afresh at every install: a PREFIX that changed since the last one must
# not leave the old path in ExecStart.
install: $(BUILD)/gpumem
	$(INSTALL) -d '$(DESTDIR)$(SBINDIR)' '$(DESTDIR)$(SYSTEMDUNITDIR)' '$(DESTDIR)$(MANDIR)/man8'
	$(INSTALL) -m 0755 $(BUILD)/gpumem '$(DESTDIR)$(SBINDIR)/gpumem'
	sed 's|@SBINDIR@|$(SBINDIR)|g' deploy/gpumem.service.in > $(BUILD)/gpumem.service
	$(INSTALL) -m 0644 $(BUILD)/gpumem.service '$(DESTDIR)$(SYSTEMDUNITDIR)/gpumem.service'
	$(INSTALL) -m 0644 docs/gpumem.8 '$(DESTDIR)$(MANDIR)/man8/gpumem.8'

uninstall:
	rm -f '$(DESTDIR)$(SBINDIR)/gpumem' '$(DESTDIR)$(SYSTEMDUNITDIR)/gpumem.service' \
		'$(DESTDIR)$(MANDIR)/man8/gpumem.8'

# The man page passes mandoc's lint with nothing to say (or, without mandoc, man's warnings).
man-lint:
	@tests/man_lint.sh docs/gpumem.8

# The make it runs is named through another variable: a recipe that says $(MAKE) runs even
# under make -n, and this one installs (into a temporary directory).
INSTALL_CHECK_MAKE = $(MAKE)
install-check: $(BUILD)/gpumem
	@MAKE='$(INSTALL_CHECK_MAKE)' BUILD='$(BUILD)' tests/install_check.sh
