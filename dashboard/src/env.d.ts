// Stylesheets are bundled by Vite; a side-effect import of one has no exports.
declare module '*.css';
