"""The hetsched command (click): options, printing, exit codes; thin over the layers below."""
